"""ClusterStack: the production-shaped local stack (``stack up --cluster``): three Kafka brokers
in KRaft (combined roles, a quorum of three) and the Redis part (stack.cluster_redis).

Every process is recorded in ``<state>/cluster/cluster.json`` with its role, ports, pid and
start time; ``down`` stops exactly those. The state dir's lock and jar set are shared with the
single-node stack, which stays the default.
"""

from __future__ import annotations

import asyncio
import ssl
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.helpers import create_ssl_context

from agentledger.errors import StackError
from agentledger.stack.certs import Certificates, ensure_certificates
from agentledger.stack.cluster_config import (
    BROKERS,
    CLIENT_USER,
    INTER_BROKER_MECHANISM,
    NODE_IDS,
    BrokerPorts,
    ClusterPaths,
    Credentials,
    broker_properties,
    cluster_broker_command,
    cluster_format_command,
    security_properties,
)
from agentledger.stack.cluster_redis import ensure_redis
from agentledger.stack.cluster_state import (
    ClusterProcess,
    ClusterState,
    bootstrap_of,
    load_cluster_state,
    load_or_create_credentials,
    save_cluster_state,
)
from agentledger.stack.config import (
    KAFKA_VERSION,
    new_cluster_id,
    parse_properties,
    render_log4j2,
    render_properties,
)
from agentledger.stack.jars import ensure_jars
from agentledger.stack.kafka import (
    check_java,
    exit_detail,
    live_brokers,
    run_storage_tool,
    spawn_broker,
)
from agentledger.stack.ports import accepts, free_ports, port_is_free
from agentledger.stack.procs import (
    is_alive,
    kill_now,
    log_tail,
    terminate,
    wait_gone,
)
from agentledger.stack.statefile import locked

log = structlog.get_logger(__name__)

BROKER_ROLE = "kafka broker+controller"
FORMAT_TIMEOUT_S = 120.0
READY_TIMEOUT_S = 180.0
KAFKA_STOP_GRACE_S = 20.0
REDIS_STOP_GRACE_S = 10.0
PROBE_TIMEOUT_S = 5.0
REUSE_PATIENCE_S = 60.0  # how long live but silent brokers get before they are replaced


def _now() -> datetime:
    return datetime.now(UTC)


class ClusterStack:
    """The three-broker Kafka + Redis part under one state directory (see the module doc)."""

    def __init__(self, state_dir: Path, *, secured: bool = True) -> None:
        self.paths = ClusterPaths(state_dir.resolve())
        # Plaintext only for developing against clients without security settings; a cluster
        # keeps the mode it was first configured with until `down` and a fresh state dir.
        self.secured = secured

    def load(self) -> ClusterState:
        """cluster.json, or an empty state."""
        return load_cluster_state(self.paths)

    def _save(self, state: ClusterState) -> ClusterState:
        return save_cluster_state(self.paths, state)

    # -- what clients need -----------------------------------------------------------------------

    def certificates(self) -> Certificates:
        """The CA and node certificates (made once in the state dir by stack.certs)."""
        return ensure_certificates(self.paths.certs)

    def credentials(self) -> Credentials:
        """The generated passwords (created on first use)."""
        return load_or_create_credentials(self.paths)

    def kafka_env(self, state: ClusterState) -> dict[str, str]:
        """``AGENTLEDGER_KAFKA_*`` (and the replication factor) for a client of this cluster."""
        env = {
            "AGENTLEDGER_KAFKA_BOOTSTRAP": bootstrap_of(state.kafka),
            "AGENTLEDGER_REPLICATION_FACTOR": str(BROKERS),
        }
        if state.secured:
            env |= {
                "AGENTLEDGER_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "AGENTLEDGER_KAFKA_SASL_MECHANISM": INTER_BROKER_MECHANISM,
                "AGENTLEDGER_KAFKA_SASL_USERNAME": CLIENT_USER,
                "AGENTLEDGER_KAFKA_SASL_PASSWORD": self.credentials().client_password,
                "AGENTLEDGER_KAFKA_SSL_CAFILE": str(self.certificates().ca_cert),
            }
        return env

    def env(self, state: ClusterState) -> dict[str, str]:
        """Every variable a client of the cluster stack sets: Kafka's, then the Redis part's."""
        return self.kafka_env(state) | state.redis_env

    def client_options(self, state: ClusterState) -> dict[str, Any]:
        """aiokafka keyword arguments that authenticate to this cluster (empty when plaintext)."""
        if not state.secured:
            return {}
        context: ssl.SSLContext = create_ssl_context(cafile=str(self.certificates().ca_cert))
        return {
            "security_protocol": "SASL_SSL",
            "ssl_context": context,
            "sasl_mechanism": INTER_BROKER_MECHANISM,
            "sasl_plain_username": CLIENT_USER,
            "sasl_plain_password": self.credentials().client_password,
        }

    # -- up ------------------------------------------------------------------------------------

    async def up(self) -> ClusterState:
        """Start what is not running (live processes are reused); return once all answer."""
        async with locked(self.paths.single):
            state = self.load()
            state = await self._ensure_kafka(state)
            # The hook of the Redis part: it starts its nodes and says how clients reach them.
            part = await ensure_redis(self.paths, state.redis)
            state = self._save(
                state.model_copy(update={"redis": part.processes, "redis_env": part.env})
            )
        log.info("stack_cluster_up", processes=[p.name for p in state.processes])
        return state

    async def _ensure_kafka(self, state: ClusterState) -> ClusterState:
        """Reuse the live brokers, start the others (configuring all when none runs)."""
        check_java()
        await ensure_jars(self.paths.single)
        live = [p for p in state.kafka if _live(p)]
        if len(state.kafka) == BROKERS and len(live) == BROKERS:
            try:
                await self._wait_ready(state, state.kafka, REUSE_PATIENCE_S)
            except StackError:
                log.warning("stack_cluster_kafka_unresponsive_restarting")
                await self._stop(state.kafka)
                state = self._save(state.model_copy(update={"kafka": _stopped_all(state.kafka)}))
            else:
                return state
        live = [p for p in state.kafka if _live(p)]
        if not live:
            state = await self._configure(state)
        else:
            self._check_ports_free([p for p in state.kafka if p not in live])
        return await self._start_missing(state)

    def _check_ports_free(self, dead: list[ClusterProcess]) -> None:
        taken = [port for p in dead for port in p.ports.values() if not port_is_free(port)]
        if taken:
            msg = (
                f"cannot restart Kafka nodes on their ports {taken}: taken by another process; "
                "run `agentledger stack down` and `stack up --cluster` again"
            )
            raise StackError(msg)

    async def _configure(self, state: ClusterState) -> ClusterState:
        """Choose ports, write every node's config and format its storage (once)."""
        previous = {p.name: p for p in state.kafka}
        preferred: list[int | None] = []
        for node in NODE_IDS:
            old = previous.get(_name(node))
            for listener in ("client", "internal", "controller"):
                preferred.append(old.ports.get(listener) if old else None)
        chosen = free_ports(preferred)
        ports = {node: BrokerPorts(*chosen[3 * i : 3 * i + 3]) for i, node in enumerate(NODE_IDS)}
        cluster_id = state.kafka_cluster_id or self._formatted_id() or new_cluster_id()
        creds = self.credentials()
        security = security_properties(self.certificates(), creds) if self.secured else None
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.paths.log4j.write_text(render_log4j2("INFO"))
        self.paths.tool_log4j.write_text(render_log4j2("WARN"))
        records = []
        for node in NODE_IDS:
            data = self.paths.broker_data(node)
            data.mkdir(parents=True, exist_ok=True)
            props = broker_properties(node, ports, data, security)
            self.paths.server_properties(node).write_text(render_properties(props))
            mine = ports[node]
            records.append(
                ClusterProcess(
                    name=_name(node),
                    role=BROKER_ROLE,
                    port=mine.client,
                    ports={
                        "client": mine.client,
                        "internal": mine.internal,
                        "controller": mine.controller,
                    },
                    markers=(str(self.paths.server_properties(node)),),
                    version=KAFKA_VERSION,
                )
            )
        creds_or_none = creds if security is not None else None
        await asyncio.gather(*(self._format(node, cluster_id, creds_or_none) for node in NODE_IDS))
        return self._save(
            state.model_copy(
                update={
                    "kafka": tuple(records),
                    "kafka_cluster_id": cluster_id,
                    "secured": security is not None,
                }
            )
        )

    def _formatted_id(self) -> str | None:
        for node in NODE_IDS:
            meta = self.paths.broker_data(node) / "meta.properties"
            if meta.exists():
                return parse_properties(meta.read_text()).get("cluster.id")
        return None

    async def _format(self, node: int, cluster_id: str, creds: Credentials | None) -> None:
        """Format one node's log directory (no-op when formatted), SCRAM users included."""
        if (self.paths.broker_data(node) / "meta.properties").exists():
            return
        argv = cluster_format_command(self.paths, node, cluster_id, creds)
        await run_storage_tool(argv, f"Kafka node {node}")

    async def _start_missing(self, state: ClusterState) -> ClusterState:
        """Spawn every broker that does not run, then wait until each sees all brokers."""
        records = list(state.kafka)
        started: list[ClusterProcess] = []
        for i, rec in enumerate(records):
            if _live(rec):
                continue
            node = _node(rec.name)
            log_file = self.paths.broker_log(node)
            log_file.parent.mkdir(parents=True, exist_ok=True)
            pid, ticks = spawn_broker(cluster_broker_command(self.paths, node), log_file)
            records[i] = rec.model_copy(
                update={"pid": pid, "proc_start": ticks, "started_at": _now()}
            )
            started.append(records[i])
        state = self._save(state.model_copy(update={"kafka": tuple(records)}))
        try:
            await self._wait_ready(state, tuple(started), READY_TIMEOUT_S)
        except BaseException:
            await self._stop(tuple(started))
            stopped = tuple(r.stopped() if r in started else r for r in records)
            self._save(state.model_copy(update={"kafka": stopped}))
            raise
        log.info("stack_cluster_kafka_started", nodes=[r.name for r in started])
        return state

    async def _wait_ready(
        self, state: ClusterState, nodes: tuple[ClusterProcess, ...], limit_s: float
    ) -> None:
        """Wait until each of ``nodes`` answers metadata listing every broker; fail if one dies."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_s
        waiting = list(nodes)
        while waiting:
            for rec in list(waiting):
                if rec.pid is None or rec.proc_start is None:
                    continue
                if not is_alive(rec.pid, rec.proc_start):
                    tail = log_tail(self.paths.broker_log(_node(rec.name)), 30)
                    msg = f"Kafka node {rec.name} exited during start-up:\n{exit_detail(tail)}"
                    raise StackError(msg)
                if await accepts(rec.port) and await self._answers(state, rec.port) == BROKERS:
                    waiting.remove(rec)
            if not waiting:
                return
            if loop.time() >= deadline:
                names = ", ".join(r.name for r in waiting)
                msg = f"Kafka nodes {names} did not become ready within {limit_s:.0f}s"
                raise StackError(msg)
            await asyncio.sleep(0.3)

    async def _answers(self, state: ClusterState, port: int) -> int:
        """How many brokers the node on ``port`` reports (0 when it does not answer)."""
        admin = AIOKafkaAdminClient(
            bootstrap_servers=f"127.0.0.1:{port}",
            request_timeout_ms=int(PROBE_TIMEOUT_S * 1000),
            **self.client_options(state),
        )
        return await live_brokers(admin, PROBE_TIMEOUT_S)

    # -- down, status, chaos ---------------------------------------------------------------------

    async def _stop(self, procs: tuple[ClusterProcess, ...]) -> list[str]:
        """SIGTERM the processes together (SIGKILL after a grace); the names that were ours."""

        async def one(proc: ClusterProcess) -> str | None:
            if proc.pid is None or proc.proc_start is None:
                return None
            grace = KAFKA_STOP_GRACE_S if proc.role == BROKER_ROLE else REDIS_STOP_GRACE_S
            ours = await terminate(proc.pid, proc.proc_start, proc.markers, grace=grace)
            return proc.name if ours else None

        names = await asyncio.gather(*(one(p) for p in procs))
        return [n for n in names if n is not None]

    async def down(self) -> list[str]:
        """Stop exactly the processes recorded as ours; returns the names stopped."""
        async with locked(self.paths.single):
            state = self.load()
            if not state.processes:
                return []
            stopped = await self._stop(state.processes)
            self._save(
                state.model_copy(
                    update={"kafka": _stopped_all(state.kafka), "redis": _stopped_all(state.redis)}
                )
            )
        log.info("stack_cluster_down", stopped=stopped)
        return stopped

    async def status(self) -> list[dict[str, Any]]:
        """Every recorded process: name, role, port, ports, pid and health."""
        rows = []
        for proc in self.load().processes:
            if proc.pid is None or proc.proc_start is None:
                health = "stopped"
            elif not _live(proc):
                health = "dead"
            else:
                health = "running" if await accepts(proc.port) else "unhealthy"
            rows.append(
                {
                    "stack": "cluster",
                    "name": proc.name,
                    "role": proc.role,
                    "port": proc.port,
                    "ports": dict(proc.ports),
                    "pid": proc.pid if health != "stopped" else None,
                    "health": health,
                    "version": proc.version,
                }
            )
        return rows

    async def kill_broker(self, node: int) -> bool:
        """SIGKILL one broker (chaos); False if it was not running."""
        async with locked(self.paths.single):
            state = self.load()
            rec = next((p for p in state.kafka if p.name == _name(node)), None)
            if rec is None or rec.pid is None or rec.proc_start is None:
                return False
            if not kill_now(rec.pid, rec.proc_start, rec.markers):
                return False
            if not await wait_gone(rec.pid, rec.proc_start, 10.0):
                msg = f"Kafka node {rec.name} (pid {rec.pid}) survived SIGKILL"
                raise StackError(msg)
            kafka = tuple(p.stopped() if p.name == rec.name else p for p in state.kafka)
            self._save(state.model_copy(update={"kafka": kafka}))
            return True


def _live(proc: ClusterProcess) -> bool:
    return proc.is_running()


def _name(node: int) -> str:
    return f"kafka-{node}"


def _node(name: str) -> int:
    return int(name.rpartition("-")[2])


def _stopped_all(procs: tuple[ClusterProcess, ...]) -> tuple[ClusterProcess, ...]:
    return tuple(p.stopped() for p in procs)
