"""Test helpers shipped with agentledger: an in-memory ledger environment and simulated crashes.

``LedgerEnvironment`` wires a :class:`~agentledger.Ledger` to the in-memory event log, lease store
and provider, which pass the same contract suites as Kafka, Redis and the sandbox. Each
``env.ledger()`` is a fresh worker (as a new process would be); a :class:`CrashSwitch` stops a
run at a kill point exactly as SIGKILL would, minus the process: nothing more is written and
the lease is left to expire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from agentledger._core.killswitch import KillSwitch
from agentledger._core.loader import fold_log
from agentledger._core.payloads import Payloads
from agentledger._core.writer import Checkpoints
from agentledger.bus.memory import MemoryEventLog
from agentledger.bus.port import EventLog, Position
from agentledger.events.models import Event, RunEvent, now_ms
from agentledger.leasing import MemoryLeaseStore
from agentledger.leasing.run_index import MemoryRunIndex
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import Provider
from agentledger.telemetry.worker_metrics import WorkerMetrics
from agentledger.views import RunView
from agentledger.views.store import ViewReader
from agentledger.worker import Connection, Ledger


class SimulatedCrash(BaseException):
    """Raised by :class:`CrashSwitch` where a real switch would SIGKILL the process."""

    def __init__(self, point: str, run_id: str) -> None:
        self.point = point
        self.run_id = run_id
        super().__init__(f"simulated crash at {point} in run {run_id}")


class CrashSwitch(KillSwitch):
    """A kill switch that raises :class:`SimulatedCrash` instead of killing the process."""

    def fire(self, point: str, run_id: str) -> None:
        """Unwind as a crash: a BaseException no SDK code catches."""
        raise SimulatedCrash(point, run_id)


class RecordingEventLog(EventLog):
    """Wraps a log and keeps every published batch: one batch is one transaction."""

    def __init__(self, inner: EventLog) -> None:
        self.inner = inner
        self.batches: list[list[Event]] = []
        #: read_run and run_end_positions calls (opening a new run from the index makes none).
        self.reads = 0

    async def publish(self, events: Sequence[Event]) -> None:
        """Publish through the wrapped log, then remember the batch."""
        await self.inner.publish(events)
        self.batches.append(list(events))

    async def read_run(
        self, run_id: str, *, since: Mapping[tuple[str, int], int] | None = None
    ) -> list[RunEvent]:
        """The wrapped log's events of the run."""
        self.reads += 1
        return await self.inner.read_run(run_id, since=since)

    async def run_end_positions(self, run_id: str) -> list[Position]:
        """The wrapped log's end positions."""
        self.reads += 1
        return await self.inner.run_end_positions(run_id)

    async def never_written(self) -> bool:
        """The wrapped log's answer."""
        return await self.inner.never_written()

    def batch_types(self) -> list[list[str]]:
        """The event type names of every batch, in order."""
        return [[type(e).__name__ for e in batch] for batch in self.batches]


@dataclass
class ManualClock:
    """Epoch-ms clock that moves only when told (leases expire when you say so)."""

    now: int = field(default_factory=now_ms)

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        """Move time forward by ``ms`` milliseconds."""
        self.now += ms


class LedgerEnvironment:
    """In-memory log, leases and provider, and fresh ledgers over them; ``async with`` it."""

    def __init__(
        self,
        *,
        providers: Mapping[str, Provider] | None = None,
        lease_ttl_ms: int = 10_000,
        payloads: Payloads | None = None,
    ) -> None:
        self.clock = ManualClock()
        self.memory_log = MemoryEventLog()
        self.log = RecordingEventLog(self.memory_log)
        self.leases = MemoryLeaseStore(clock=self.clock)
        # Not vouched for: like a Redis that has not seen the empty log yet.
        self.runs = MemoryRunIndex(whole=False)
        self.memory_log.guard = self.leases
        self.provider = MemoryProvider(name="sandbox")
        self.providers: dict[str, Provider] = dict(providers or {"sandbox": self.provider})
        self.lease_ttl_ms = lease_ttl_ms
        self.payloads = payloads
        self._workers = 0

    async def __aenter__(self) -> LedgerEnvironment:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop the in-memory log (idempotent)."""
        await self.memory_log.stop()

    def ledger(
        self,
        *,
        kill_switch: KillSwitch | None = None,
        views: ViewReader | None = None,
        worker_id: str | None = None,
        checkpoints: Checkpoints = "each_step",
        run_index: bool = False,
        metrics: WorkerMetrics | None = None,
        lease_wait_s: float = 0.0,
    ) -> Ledger:
        """A new worker over the shared ports, with its own id (like a new process); with
        ``run_index`` it opens new runs from the shared in-memory run index (``runs``)."""
        self._workers += 1
        return Ledger(
            log=self.log,
            leases=self.leases,
            providers=self.providers,
            views=views,
            payloads=self.payloads,
            kill_switch=kill_switch,
            worker_id=worker_id or f"test-worker-{self._workers}",
            lease_ttl_ms=self.lease_ttl_ms,
            lease_wait_s=lease_wait_s,
            clock=self.clock,
            checkpoints=checkpoints,
            runs=self.runs if run_index else None,
            metrics=metrics,
        )

    def connection(self, **ledger: Any) -> Connection:
        """What ``agentledger.connect`` gives, on these in-memory ports (a new worker)."""
        return Connection(self.ledger(**ledger))

    def crash_switch(self, point: str, hit: int = 1) -> CrashSwitch:
        """A switch that crashes the run at the ``hit``-th time ``point`` is reached."""
        return CrashSwitch(point, hit)

    def expire_leases(self) -> None:
        """Let every lease run out, as after a dead worker's ttl."""
        self.clock.advance(self.lease_ttl_ms + 1)

    def flush_redis(self) -> None:
        """Forget every lease and fence (and the run index), as FLUSHALL does."""
        self.leases.flush()
        self.runs.flush()

    async def events(self, run_id: str) -> list[RunEvent]:
        """Every committed event of the run, in seq order."""
        return await self.log.read_run(run_id)

    async def view(self, run_id: str) -> RunView:
        """The run's view folded from the log (what a cold resume sees)."""
        return await fold_log(self.log, run_id)

    def alerts(self) -> list[Event]:
        """Every alert published so far."""
        return self.memory_log.events(self.memory_log.topics.alerts)
