"""LocalStack: bring the embedded Kafka + Redis up, down, report them, restart the broker."""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Literal, Self, TypeVar

import structlog

from agentledger.errors import StackError
from agentledger.stack.config import KAFKA_VERSION, KafkaPorts, StackPaths, new_cluster_id
from agentledger.stack.holders import live_holders, register
from agentledger.stack.jars import ensure_jars
from agentledger.stack.kafka import (
    KafkaBindError,
    broker_answers,
    check_java,
    format_storage,
    formatted_cluster_id,
    kafka_markers,
    start_broker,
    wait_broker_ready,
    write_configs,
)
from agentledger.stack.ports import free_ports, port_is_free
from agentledger.stack.procs import is_ours, kill_now, terminate, wait_gone
from agentledger.stack.redis_server import (
    find_redis_server,
    redis_answers,
    redis_markers,
    redis_version,
    start_redis,
    wait_redis_ready,
)
from agentledger.stack.state import (
    ComponentStatus,
    DownReport,
    Endpoints,
    Health,
    KafkaRecord,
    ProcessRecord,
    RedisRecord,
    StackState,
    StackStatus,
    UpReport,
    kafka_bootstrap,
    redis_url,
)
from agentledger.stack.statefile import load_state, locked, save_state

log = structlog.get_logger(__name__)

Component = Literal["kafka", "redis"]
BOTH: tuple[Component, ...] = ("redis", "kafka")
KAFKA_STOP_GRACE_S = 30.0
REDIS_STOP_GRACE_S = 10.0
BIND_ATTEMPTS = 3
REUSE_PATIENCE_S = 60.0  # how long a live but silent server of ours gets before replacement


def _now() -> datetime:
    return datetime.now(UTC)


R = TypeVar("R", bound=ProcessRecord)


def _stopped(record: R) -> R:
    """The record of a process that no longer runs (ports and ids are kept for the next start)."""
    return record.model_copy(update={"pid": None, "proc_start": None, "started_at": None})


class LocalStack:
    """The embedded Kafka + Redis under one state directory; an async context manager.

    Entering registers this process as a holder and brings the stack up, reusing whatever
    already runs there. Leaving unregisters; when the last live holder leaves, the processes
    that contexts started are stopped (a stack started by ``agentledger stack up`` is left
    alone), unless ``keep_running``. ``stop()`` is idempotent.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        keep_running: bool = False,
        components: Collection[Component] = BOTH,
    ) -> None:
        self.paths = StackPaths(state_dir.resolve())
        self.keep_running = keep_running
        self.components = tuple(components)
        self._holder: Path | None = None
        self.last_up: UpReport | None = None

    @property
    def endpoints(self) -> Endpoints:
        """Both endpoints, as found by the last ``up`` (which must have covered both)."""
        if self.last_up is None:
            msg = "the local stack is not up yet: call up() or enter the context first"
            raise StackError(msg)
        return self.last_up.endpoints

    async def __aenter__(self) -> Self:
        """Hold the stack and bring it up."""
        self._holder = register(self.paths.holders)
        try:
            report = await self.up(self.components)
        except BaseException:
            await self.stop()
            raise
        if report.started and not self.keep_running:
            async with self._locked():
                state = self.load()
                held = tuple(sorted({*state.held, *report.started}))
                self._save(state.model_copy(update={"held": held}))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Release the stack."""
        await self.stop()

    async def stop(self) -> None:
        """Stop holding; the last holder out stops what contexts started (idempotent)."""
        holder, self._holder = self._holder, None
        if holder is None:
            return
        async with self._locked():
            holder.unlink(missing_ok=True)
            if live_holders(self.paths.holders):
                return
            state = self.load()
            if state.held:
                held = [c for c in BOTH if c in state.held]
                await self._down_unlocked(held)
                self._save(self.load().model_copy(update={"held": ()}))

    # -- state file and lock -------------------------------------------------------------------

    def load(self) -> StackState:
        """The state file, or an empty state when there is none."""
        return load_state(self.paths)

    def _save(self, state: StackState) -> StackState:
        return save_state(self.paths, state)

    def _locked(self) -> AbstractAsyncContextManager[None]:
        return locked(self.paths)

    # -- up --------------------------------------------------------------------------------------

    async def up(self, components: Collection[Component] = BOTH) -> UpReport:
        """Start what is not running (healthy processes are reused) and wait until both answer."""
        started: list[Component] = []
        reused: list[Component] = []
        async with self._locked():
            state = self.load()
            if "redis" in components:
                state, did = await self._ensure_redis(state)
                (started if did else reused).append("redis")
            if "kafka" in components:
                state, did = await self._ensure_kafka(state)
                (started if did else reused).append("kafka")
        report = UpReport(
            kafka_bootstrap=kafka_bootstrap(state.kafka)
            if state.kafka and "kafka" in components
            else None,
            redis_url=redis_url(state.redis) if state.redis and "redis" in components else None,
            started=tuple(started),
            reused=tuple(reused),
        )
        self.last_up = report
        log.info("stack_up", started=started, reused=reused, state_dir=str(self.paths.root))
        return report

    async def _ensure_redis(self, state: StackState) -> tuple[StackState, bool]:
        """Reuse a healthy Redis of ours or start one."""
        rec = state.redis
        if rec is not None and rec.pid is not None and rec.proc_start is not None:
            markers = redis_markers(self.paths, rec.port)
            if is_ours(rec.pid, rec.proc_start, markers):
                try:
                    await wait_redis_ready(
                        self.paths, rec.pid, rec.proc_start, rec.port, REUSE_PATIENCE_S
                    )
                except StackError:
                    log.warning("stack_redis_unresponsive_restarting", pid=rec.pid)
                else:
                    return state, False
                await terminate(rec.pid, rec.proc_start, markers, grace=REDIS_STOP_GRACE_S)
        exe = await find_redis_server()
        version = await redis_version(exe)
        [port] = free_ports([rec.port if rec else None])
        pid, ticks = start_redis(self.paths, exe, port)
        new = RedisRecord(pid=pid, proc_start=ticks, port=port, started_at=_now(), version=version)
        state = self._save(state.model_copy(update={"redis": new}))
        try:
            await wait_redis_ready(self.paths, pid, ticks, port)
        except BaseException:
            await terminate(pid, ticks, redis_markers(self.paths, port), grace=REDIS_STOP_GRACE_S)
            self._save(state.model_copy(update={"redis": _stopped(new)}))
            raise
        log.info("stack_redis_started", pid=pid, port=port, version=version)
        return state, True

    async def _ensure_kafka(self, state: StackState) -> tuple[StackState, bool]:
        """Reuse a healthy broker of ours or start one (fetching jars and formatting if needed)."""
        rec = state.kafka
        if rec is not None and rec.pid is not None and rec.proc_start is not None:
            markers = kafka_markers(self.paths)
            if is_ours(rec.pid, rec.proc_start, markers):
                # Alive but slow (busy machine, still starting): give it time before replacing it.
                try:
                    await wait_broker_ready(
                        self.paths, rec.pid, rec.proc_start, rec.port, REUSE_PATIENCE_S
                    )
                except StackError:
                    log.warning("stack_kafka_unresponsive_restarting", pid=rec.pid)
                else:
                    return state, False
                await terminate(rec.pid, rec.proc_start, markers, grace=KAFKA_STOP_GRACE_S)
        return await self._start_kafka(state, same_ports=False), True

    async def _start_kafka(self, state: StackState, *, same_ports: bool) -> StackState:
        """Start the broker; on a bind race pick new ports (unless they must stay the same)."""
        check_java()
        await ensure_jars(self.paths)
        rec = state.kafka
        cluster_id = (
            formatted_cluster_id(self.paths)
            or (rec.cluster_id if rec else None)
            or new_cluster_id()
        )
        preferred = [rec.port, rec.controller_port] if rec else [None, None]
        for attempt in range(BIND_ATTEMPTS):
            if same_ports and rec is not None:
                taken = [p for p in (rec.port, rec.controller_port) if not port_is_free(p)]
                if taken:
                    msg = f"cannot restart Kafka on the same ports: {taken} are taken by another"
                    raise StackError(msg)
                broker, controller = rec.port, rec.controller_port
            else:
                broker, controller = free_ports(preferred if attempt == 0 else [None, None])
            write_configs(self.paths, KafkaPorts(broker=broker, controller=controller))
            await format_storage(self.paths, cluster_id)
            pid, ticks = start_broker(self.paths)
            new = KafkaRecord(
                pid=pid,
                proc_start=ticks,
                port=broker,
                controller_port=controller,
                cluster_id=cluster_id,
                started_at=_now(),
                version=KAFKA_VERSION,
            )
            state = self._save(state.model_copy(update={"kafka": new}))
            try:
                await wait_broker_ready(self.paths, pid, ticks, broker)
            except KafkaBindError:
                state = self._save(state.model_copy(update={"kafka": _stopped(new)}))
                if same_ports:
                    raise
                log.warning("stack_kafka_port_race_retrying", port=broker, attempt=attempt + 1)
                continue
            except BaseException:
                await terminate(pid, ticks, kafka_markers(self.paths), grace=KAFKA_STOP_GRACE_S)
                self._save(state.model_copy(update={"kafka": _stopped(new)}))
                raise
            log.info("stack_kafka_started", pid=pid, port=broker, controller_port=controller)
            return state
        msg = f"Kafka found no free ports in {BIND_ATTEMPTS} attempts; see {self.paths.kafka_log}"
        raise StackError(msg)

    # -- down, status ----------------------------------------------------------------------------

    def _markers(self, name: Component, rec: ProcessRecord) -> tuple[str, ...]:
        if name == "kafka":
            return kafka_markers(self.paths)
        return redis_markers(self.paths, rec.port)

    async def down(self, components: Collection[Component] = BOTH) -> DownReport:
        """Stop exactly the processes recorded as ours; records of dead ones are cleared."""
        async with self._locked():
            return await self._down_unlocked(components)

    async def _down_unlocked(self, components: Collection[Component]) -> DownReport:
        """``down`` for a caller that holds the lock."""
        stopped: list[str] = []
        gone: list[str] = []
        state = self.load()
        for name in ("kafka", "redis"):
            rec: ProcessRecord | None = getattr(state, name)
            if name not in components or rec is None:
                continue
            if rec.pid is not None and rec.proc_start is not None:
                grace = KAFKA_STOP_GRACE_S if name == "kafka" else REDIS_STOP_GRACE_S
                markers = self._markers(name, rec)
                ours = await terminate(rec.pid, rec.proc_start, markers, grace=grace)
                (stopped if ours else gone).append(name)
            state = self._save(state.model_copy(update={name: _stopped(rec)}))
        log.info("stack_down", stopped=stopped, already_gone=gone)
        return DownReport(stopped=tuple(stopped), already_gone=tuple(gone))

    async def status(self) -> StackStatus:
        """What runs, where, since when: checked against /proc and by asking each server."""
        state = self.load()
        return StackStatus(
            state_dir=self.paths.root,
            kafka=await self._component_status("kafka", state.kafka),
            redis=await self._component_status("redis", state.redis),
        )

    async def _component_status(
        self, name: Component, rec: ProcessRecord | None
    ) -> ComponentStatus:
        """The health of one component, from its record, /proc, and a live probe."""
        if rec is None or rec.pid is None or rec.proc_start is None:
            health = Health.STOPPED
        elif not is_ours(rec.pid, rec.proc_start, self._markers(name, rec)):
            health = Health.DEAD
        elif name == "kafka" and isinstance(rec, KafkaRecord):
            answers = await broker_answers(kafka_bootstrap(rec))
            health = Health.RUNNING if answers else Health.UNHEALTHY
        else:
            health = Health.RUNNING if await redis_answers(rec.port) else Health.UNHEALTHY
        endpoint = None
        if rec is not None and health is not Health.STOPPED:
            endpoint = kafka_bootstrap(rec) if isinstance(rec, KafkaRecord) else redis_url(rec)
        return ComponentStatus(
            name=name,
            health=health,
            endpoint=endpoint,
            pid=rec.pid if rec is not None else None,
            started_at=rec.started_at if rec is not None else None,
            version=rec.version if rec is not None else "",
        )

    # -- broker chaos: stop / start on the same port and data / restart / kill -------------------

    async def stop_kafka(self) -> bool:
        """Stop the broker gracefully; False if it was not running."""
        only: tuple[Component, ...] = ("kafka",)
        report = await self.down(only)
        return bool(report.stopped)

    async def start_kafka(self) -> Endpoints:
        """Start the broker again on the SAME ports and data (it must have been up before)."""
        async with self._locked():
            state = self.load()
            if state.kafka is None:
                msg = f"no Kafka was ever started under {self.paths.root}; run `stack up` first"
                raise StackError(msg)
            rec = state.kafka
            if (
                rec.pid is not None
                and rec.proc_start is not None
                and is_ours(rec.pid, rec.proc_start, kafka_markers(self.paths))
            ):
                return self.endpoints_from(state)
            state = await self._start_kafka(state, same_ports=True)
        return self.endpoints_from(state)

    async def restart_kafka(self) -> Endpoints:
        """Stop the broker and start it again on the same ports and data."""
        await self.stop_kafka()
        return await self.start_kafka()

    async def kill_kafka(self) -> bool:
        """SIGKILL the broker (no clean shutdown); False if it was not running."""
        async with self._locked():
            rec = self.load().kafka
            if rec is None or rec.pid is None or rec.proc_start is None:
                return False
            if not kill_now(rec.pid, rec.proc_start, kafka_markers(self.paths)):
                return False
            if not await wait_gone(rec.pid, rec.proc_start, 10.0):
                msg = f"Kafka (pid {rec.pid}) survived SIGKILL"
                raise StackError(msg)
            return True

    async def kill_redis(self) -> bool:
        """SIGKILL Redis (no clean shutdown; its AOF keeps what it wrote); False if it was not
        running. ``up`` starts it again on the same port and data."""
        async with self._locked():
            rec = self.load().redis
            if rec is None or rec.pid is None or rec.proc_start is None:
                return False
            if not kill_now(rec.pid, rec.proc_start, self._markers("redis", rec)):
                return False
            if not await wait_gone(rec.pid, rec.proc_start, 10.0):
                msg = f"Redis (pid {rec.pid}) survived SIGKILL"
                raise StackError(msg)
            return True

    def endpoints_from(self, state: StackState) -> Endpoints:
        """The endpoints recorded in a state (both components must have been started once)."""
        if state.kafka is None or state.redis is None:
            msg = f"the local stack under {self.paths.root} was never started: run `stack up`"
            raise StackError(msg)
        return Endpoints(kafka_bootstrap(state.kafka), redis_url(state.redis))
