"""A secured single node for tests: one Kafka broker with SASL_SSL and mTLS, one Redis over TLS.

The default local stack stays plaintext (``make demo``, ``make test``, the quick start); this
one is for proving the client security end to end::

    async with SecureStack(root, jars=StackPaths(state_dir).jars) as secure:
        settings = CommonSettings(**secure.kafka_settings("SCRAM-SHA-256"),
                                  **secure.redis_settings())

- Kafka listener ``SASL_SSL`` (:attr:`SecureStack.sasl_bootstrap`) accepts PLAIN, SCRAM-SHA-256
  and SCRAM-SHA-512 for one user; the SCRAM credentials are created when the storage is
  formatted (``--add-scram``), PLAIN's by the listener's JAAS config.
- Kafka listener ``SSL`` (:attr:`SecureStack.mtls_bootstrap`) requires a client certificate
  signed by the stack's CA (mutual TLS); it is also the inter-broker listener.
- Kafka listener ``SASL_PLAINTEXT`` (:attr:`SecureStack.sasl_plaintext_bootstrap`) takes the
  same logins without TLS: the bad-credentials tests point a PLAINTEXT client at it.
- The controller listener is plaintext on loopback: clients cannot list topics through it.
- Redis has no plaintext port: ``tls-port`` only, the ``default`` user disabled, one ACL user.

Certificates come from :mod:`agentledger.stack.certs` (``<root>/certs``). The processes belong
to the context manager: leaving it stops them (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import structlog
from redis.asyncio import Redis
from redis.exceptions import RedisError

from agentledger.errors import StackError
from agentledger.redisclient import redis_options
from agentledger.settings import ArgumentsOnly, CommonSettings
from agentledger.stack.certs import Certificates, ensure_certificates, kafka_ssl_properties
from agentledger.stack.certs import redis_tls_conf as tls_lines
from agentledger.stack.config import (
    KafkaPorts,
    StackPaths,
    format_command,
    kafka_command,
    new_cluster_id,
    redis_command,
    render_log4j2,
    render_properties,
    server_properties,
)
from agentledger.stack.kafka import broker_answers
from agentledger.stack.ports import free_ports
from agentledger.stack.procs import is_alive, log_tail, spawn_detached, terminate
from agentledger.stack.redis_server import find_redis_server

log = structlog.get_logger(__name__)

USER = "agentledger"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
READY_TIMEOUT_S = 120.0
FORMAT_TIMEOUT_S = 120.0
STOP_GRACE_S = 20.0


class _Probe(ArgumentsOnly, CommonSettings):
    """Settings built from arguments only (the stack's own readiness probes)."""


def _jaas_plain(user: str, password: str) -> str:
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{user}" password="{password}" user_{user}="{password}";'
    )


class SecureStack:
    """The secured single node under ``root``; an async context manager (see the module doc)."""

    def __init__(self, root: Path, *, jars: Path) -> None:
        self.root = root
        self.paths = StackPaths(root)
        self._jars = jars
        self.password = ""
        self.certs: Certificates | None = None
        self.sasl_bootstrap = ""
        self.mtls_bootstrap = ""
        self.sasl_plaintext_bootstrap = ""
        self.redis_port = 0
        self._procs: list[tuple[int, int, tuple[str, ...]]] = []

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    def require_certs(self) -> Certificates:
        """The stack's certificates (made by :meth:`start`)."""
        if self.certs is None:
            msg = "the secure stack is not started"
            raise StackError(msg)
        return self.certs

    # -- what clients set ------------------------------------------------------------------

    def kafka_settings(self, mechanism: str) -> dict[str, Any]:
        """CommonSettings values for the SASL_SSL listener with ``mechanism``."""
        return {
            "kafka_bootstrap": self.sasl_bootstrap,
            "kafka_security_protocol": "SASL_SSL",
            "kafka_sasl_mechanism": mechanism,
            "kafka_sasl_username": USER,
            "kafka_sasl_password": self.password,
            "kafka_ssl_cafile": self.require_certs().ca_cert,
        }

    def mtls_settings(self) -> dict[str, Any]:
        """CommonSettings values for the mutual-TLS listener (client certificate, no SASL)."""
        certs = self.require_certs()
        return {
            "kafka_bootstrap": self.mtls_bootstrap,
            "kafka_security_protocol": "SSL",
            "kafka_ssl_cafile": certs.ca_cert,
            "kafka_ssl_certfile": certs.client_cert,
            "kafka_ssl_keyfile": certs.client_key,
        }

    def sasl_plaintext_settings(self, mechanism: str) -> dict[str, Any]:
        """CommonSettings values for the SASL_PLAINTEXT listener (a login without TLS)."""
        return {
            "kafka_bootstrap": self.sasl_plaintext_bootstrap,
            "kafka_security_protocol": "SASL_PLAINTEXT",
            "kafka_sasl_mechanism": mechanism,
            "kafka_sasl_username": USER,
            "kafka_sasl_password": self.password,
        }

    @property
    def redis_url(self) -> str:
        """The TLS URL with the ACL user and its password."""
        return f"rediss://{USER}:{self.password}@127.0.0.1:{self.redis_port}/0"

    def redis_settings(self) -> dict[str, Any]:
        """CommonSettings values for Redis over TLS with the ACL user."""
        return {"redis_url": self.redis_url, "redis_ssl_cafile": self.require_certs().ca_cert}

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        """Make the certificates, format and start the broker, start Redis; wait for both."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.certs = ensure_certificates(self.root / "certs")
        self.password = secrets.token_urlsafe(18)
        sasl, mtls, plain, controller, redis_port = free_ports([None] * 5)
        self.sasl_bootstrap = f"127.0.0.1:{sasl}"
        self.mtls_bootstrap = f"127.0.0.1:{mtls}"
        self.sasl_plaintext_bootstrap = f"127.0.0.1:{plain}"
        self.redis_port = redis_port
        redis_server = await find_redis_server()
        await asyncio.gather(
            self._start_kafka(KafkaPorts(broker=sasl, controller=controller), mtls, plain),
            self._start_redis(redis_server),
        )

    @property
    def processes(self) -> list[tuple[int, int]]:
        """The pid and start ticks of every process this stack started and has not stopped."""
        return [(pid, ticks) for pid, ticks, _ in self._procs]

    async def stop(self) -> None:
        """Stop every process this stack started (idempotent)."""
        procs, self._procs = self._procs, []
        await asyncio.gather(
            *(terminate(pid, ticks, markers, grace=STOP_GRACE_S) for pid, ticks, markers in procs)
        )

    def _broker_properties(self, ports: KafkaPorts, mtls: int, plain: int) -> dict[str, str | int]:
        certs = self.require_certs()
        props = server_properties(ports, self.paths.kafka_data)
        ctrl = f"CONTROLLER://127.0.0.1:{ports.controller}"
        listeners = (
            f"SASL_SSL://127.0.0.1:{ports.broker},SSL://127.0.0.1:{mtls},"
            f"SASL_PLAINTEXT://127.0.0.1:{plain}"
        )
        props.update(
            {
                "listeners": f"{listeners},{ctrl}",
                "advertised.listeners": f"{listeners},{ctrl}",
                "inter.broker.listener.name": "SSL",
                "listener.security.protocol.map": (
                    "SASL_SSL:SASL_SSL,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
                ),
                "sasl.enabled.mechanisms": ",".join(MECHANISMS),
                "listener.name.sasl_ssl.plain.sasl.jaas.config": _jaas_plain(USER, self.password),
                "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                ),
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                ),
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                    _jaas_plain(USER, self.password)
                ),
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                ),
                "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                ),
                **kafka_ssl_properties(certs, client_auth="none"),
                "listener.name.ssl.ssl.client.auth": "required",
            }
        )
        return props

    async def _start_kafka(self, ports: KafkaPorts, mtls: int, plain: int) -> None:
        paths = self.paths
        if paths.kafka.exists():
            shutil.rmtree(paths.kafka)  # a fresh node each time: new password, new ports
        paths.kafka_data.mkdir(parents=True)
        paths.jars.symlink_to(self._jars, target_is_directory=True)
        paths.server_properties.write_text(
            render_properties(self._broker_properties(ports, mtls, plain))
        )
        paths.log4j.write_text(render_log4j2("INFO"))
        paths.tool_log4j.write_text(render_log4j2("WARN"))
        scram = [
            arg
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
            for arg in ("--add-scram", f"{mechanism}=[name={USER},password={self.password}]")
        ]
        await _run_format([*format_command(paths, new_cluster_id()), *scram], paths.kafka_log)
        pid, ticks = spawn_detached(kafka_command(paths), paths.kafka_log)
        self._procs.append((pid, ticks, (str(paths.server_properties),)))
        probe = _Probe(**self.kafka_settings("SCRAM-SHA-256"))
        await _until(
            lambda: broker_answers(self.sasl_bootstrap, settings=probe),
            alive=lambda: is_alive(pid, ticks),
            what=f"the secured Kafka broker ({paths.kafka_log})",
            log_file=paths.kafka_log,
        )
        log.info("secure_stack_kafka_ready", sasl=self.sasl_bootstrap, mtls=self.mtls_bootstrap)

    async def _start_redis(self, redis_server: str) -> None:
        paths = self.paths
        paths.redis_data.mkdir(parents=True, exist_ok=True)
        conf = (
            "port 0\n"
            "bind 127.0.0.1\n"
            "daemonize no\n"
            f'dir "{paths.redis_data}"\n'
            "appendonly no\n"
            'save ""\n'
            'logfile ""\n'
            + tls_lines(self.require_certs(), self.redis_port)
            + "user default off\n"
            + f"user {USER} on >{self.password} ~* &* +@all\n"
        )
        paths.redis_conf.write_text(conf)
        paths.redis_conf.chmod(0o600)  # it holds the ACL password
        pid, ticks = spawn_detached(redis_command(redis_server, paths.redis_conf), paths.redis_log)
        # Once running, redis-server retitles itself "redis-server 127.0.0.1:<port>" (its TLS
        # port here): without that marker stop() would not know it as ours and leave it running.
        title = f"redis-server 127.0.0.1:{self.redis_port}"
        self._procs.append((pid, ticks, (str(paths.redis_conf), title)))
        await _until(
            self._redis_answers,
            alive=lambda: is_alive(pid, ticks),
            what=f"the TLS Redis ({paths.redis_log})",
            log_file=paths.redis_log,
        )

    async def _redis_answers(self) -> bool:
        probe = _Probe(**self.redis_settings())
        client = Redis.from_url(
            self.redis_url, socket_timeout=2.0, **redis_options(probe, self.redis_url)
        )
        try:
            return bool(await client.ping())
        except (OSError, RedisError):
            return False
        finally:
            await client.aclose()


async def _run_format(argv: list[str], log_file: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(FORMAT_TIMEOUT_S):
        out, _ = await proc.communicate()
    if proc.returncode != 0:
        with log_file.open("ab") as handle:
            handle.write(out)
        msg = f"formatting the secured Kafka storage failed; see {log_file}"
        raise StackError(msg)


async def _until(
    ready: Any, *, alive: Any, what: str, log_file: Path, limit_s: float = READY_TIMEOUT_S
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while loop.time() < deadline:
        if not alive():
            msg = f"{what} exited during start-up:\n{log_tail(log_file, 20)}"
            raise StackError(msg)
        if await ready():
            return
        await asyncio.sleep(0.3)
    msg = f"{what} was not ready within {limit_s:.0f}s"
    raise StackError(msg)
