"""The embedded Kafka broker: write its configs, format its storage, start it, wait until ready."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import structlog
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from agentledger.errors import StackError
from agentledger.kafkaclient import kafka_options
from agentledger.settings import CommonSettings
from agentledger.stack.config import (
    KafkaPorts,
    StackPaths,
    format_command,
    kafka_command,
    parse_properties,
    render_log4j2,
    render_properties,
    server_properties,
)
from agentledger.stack.ports import accepts
from agentledger.stack.procs import is_alive, last_lines, log_tail, run_to_end, spawn_detached

log = structlog.get_logger(__name__)

FORMAT_TIMEOUT_S = 120.0
READY_TIMEOUT_S = 120.0
MIN_JAVA = 17
BIND_FAILURE = re.compile(r"BindException|Address already in use")


class KafkaBindError(StackError):
    """The broker could not bind one of its ports (taken between our choice and its start)."""


def kafka_markers(paths: StackPaths) -> tuple[str, ...]:
    """What our broker's /proc/<pid>/cmdline contains: the absolute path of its config."""
    return (str(paths.server_properties),)


def check_java() -> None:
    """Fail clearly when there is no java on PATH."""
    if shutil.which("java") is None:
        msg = (
            f"Kafka needs a Java {MIN_JAVA}+ runtime on PATH: run "
            "`apt-get install -y openjdk-17-jre-headless`"
        )
        raise StackError(msg)


def write_configs(paths: StackPaths, ports: KafkaPorts) -> None:
    """(Re)write server.properties and the log4j2 configs for these ports."""
    paths.kafka_data.mkdir(parents=True, exist_ok=True)
    props = server_properties(ports, paths.kafka_data)
    paths.server_properties.write_text(render_properties(props))
    paths.log4j.write_text(render_log4j2("INFO"))
    paths.tool_log4j.write_text(render_log4j2("WARN"))


def formatted_cluster_id(paths: StackPaths) -> str | None:
    """The cluster id the data directory was formatted with, or None when it is not formatted."""
    try:
        meta = parse_properties((paths.kafka_data / "meta.properties").read_text())
    except OSError:
        return None
    return meta.get("cluster.id")


async def format_storage(paths: StackPaths, cluster_id: str) -> None:
    """Format the KRaft log directory once (standalone controller); no-op when formatted."""
    if formatted_cluster_id(paths) is not None:
        return
    log.info("stack_kafka_formatting", data=str(paths.kafka_data), cluster_id=cluster_id)
    await run_storage_tool(
        format_command(paths, cluster_id),
        "Kafka storage",
        failed=f"Kafka storage in {paths.kafka_data}",
    )


async def run_storage_tool(argv: list[str], what: str, *, failed: str | None = None) -> None:
    """Run a storage tool ``format`` of ``what``; StackError with its output's tail (naming
    ``failed``, else ``what``) when it fails or does not finish."""
    try:
        code, out = await run_to_end(argv, FORMAT_TIMEOUT_S)
    except TimeoutError as e:
        msg = f"formatting {what} took longer than {FORMAT_TIMEOUT_S:.0f}s"
        raise StackError(msg) from e
    if code != 0:
        msg = f"formatting {failed or what} failed:\n{last_lines(out)}"
        raise StackError(msg)


def start_broker(paths: StackPaths) -> tuple[int, int]:
    """Spawn the broker detached; returns pid and start ticks."""
    return spawn_broker(kafka_command(paths), paths.kafka_log)


def spawn_broker(argv: list[str], log_file: Path) -> tuple[int, int]:
    """Spawn a broker detached, appending to ``log_file`` below a start line; pid, start ticks."""
    with log_file.open("a") as handle:
        handle.write("\n===== agentledger: starting broker =====\n")
    return spawn_detached(argv, log_file)


async def broker_answers(
    bootstrap: str, limit_s: float = 5.0, *, settings: CommonSettings | None = None
) -> bool:
    """Whether the broker answers a metadata request with itself as a live node (``settings``:
    the security options of a secured broker; None is the plaintext local stack)."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=int(limit_s * 1000),
        **kafka_options(settings),
    )
    return await live_brokers(admin, limit_s) > 0


async def live_brokers(admin: AIOKafkaAdminClient, limit_s: float) -> int:
    """How many live brokers ``admin`` (not started yet) finds in the metadata, 0 when there
    is no answer within ``limit_s``; the client is closed either way."""
    try:
        async with asyncio.timeout(limit_s):
            await admin.start()
            cluster = await admin.describe_cluster()
    except (KafkaError, OSError, TimeoutError):
        return 0
    finally:
        await admin.close()
    return len(cluster.get("brokers") or ())


async def wait_broker_ready(
    paths: StackPaths, pid: int, start_ticks: int, port: int, limit_s: float = READY_TIMEOUT_S
) -> None:
    """Wait until the broker accepts and answers metadata; fail fast if it dies."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    bootstrap = f"127.0.0.1:{port}"
    while loop.time() < deadline:
        if not is_alive(pid, start_ticks):
            _raise_died(paths.kafka_log)
        if await accepts(port) and await broker_answers(bootstrap):
            return
        await asyncio.sleep(0.2)
    msg = f"Kafka did not become ready on {bootstrap} within {limit_s:.0f}s; see {paths.kafka_log}"
    raise StackError(msg)


def _raise_died(log_file: Path) -> None:
    """Raise the error that best explains why the broker exited."""
    tail = log_tail(log_file, 40)
    if BIND_FAILURE.search(tail):
        msg = f"Kafka could not bind its port (taken meanwhile); see {log_file}"
        raise KafkaBindError(msg)
    msg = f"Kafka exited during start-up; see {log_file}:\n{exit_detail(tail)}"
    raise StackError(msg)


def exit_detail(tail: str) -> str:
    """What a broker's log tail says about its exit: its last errors, else the tail itself."""
    errors = [line for line in tail.splitlines() if "ERROR" in line or "Exception" in line]
    return "\n".join(errors[-5:]) or tail[-2000:]
