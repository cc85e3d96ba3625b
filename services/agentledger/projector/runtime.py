"""The projector's resources (Redis store, Kafka reader and publisher) and its retry loop.

A batch is never dropped: any failure is logged, the delivery state is reset (so the next
attempt re-anchors on the progress Redis holds), and the batch is retried with backoff. This is
the service's outermost loop, the one place that catches broadly.

An unreachable Kafka or Redis is waited out for the outage budget (``outage_budget_s``), counted
from the first failure of the outage; past it the runtime gives up: it keeps the error as
:attr:`ProjectorRuntime.fatal`, asks the service to stop (``on_fatal``) and applies nothing more,
so the batch is not dropped but left to the next run, which re-anchors on Redis's progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import structlog

from agentledger import outage
from agentledger.bus.publisher import KafkaPublisher
from agentledger.errors import UnreachableError
from agentledger.events.codec import EventCodec
from agentledger.events.topics import topic_names
from agentledger.projector.applier import Applier
from agentledger.projector.findings import stalled_alert
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.killpoints import ProjectorKillSwitch
from agentledger.projector.metrics import Metrics
from agentledger.projector.ports import LogRecord
from agentledger.projector.runner import Projector
from agentledger.projector.settings import ProjectorSettings
from agentledger.tasks import within
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import TopicPartition

log = structlog.get_logger(__name__)

_BACKOFF_FIRST_S = 0.1
_BACKOFF_MAX_S = 5.0
#: After this many failed attempts in a row (batches or ticks) the projector is stalled: one
#: projector.stalled alert, and /health says so until an attempt succeeds.
STALL_AFTER_FAILURES = 8
_REDIS_PING_S = 1.0
#: The metrics page's own Redis read gives up after this (it does not wait an outage out).
_PAGE_READ_S = 5.0


@dataclass
class Health:
    """What /health answers: ok only when every check passes; ``problems`` says which did not."""

    started: bool
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when the projector is started and nothing is wrong."""
        return self.started and not self.problems


class Failures:
    """Consecutive failures of one kind of work; raises one stall alert per stall."""

    def __init__(self) -> None:
        self.count = 0
        self.last_error = ""
        self.alerted = False

    def failed(self, error: str) -> bool:
        """Count a failure; True exactly when this one makes the work count as stalled."""
        self.count += 1
        self.last_error = error
        if self.count >= STALL_AFTER_FAILURES and not self.alerted:
            self.alerted = True
            return True
        return False

    def succeeded(self) -> None:
        """The work went through: the stall (if any) is over."""
        self.count = 0
        self.last_error = ""
        self.alerted = False

    @property
    def stalled(self) -> bool:
        """True while the work has failed too often in a row."""
        return self.count >= STALL_AFTER_FAILURES


class ProjectorRuntime:
    """Everything one projector process holds open; start() once, stop() idempotent."""

    def __init__(
        self, settings: ProjectorSettings, *, on_fatal: Callable[[], None] | None = None
    ) -> None:
        if settings.kafka_bootstrap is None or settings.redis_url is None:
            msg = "resolve the endpoints (agentledger.stack.resolve_settings) before starting"
            raise ValueError(msg)
        self.settings = settings
        self.metrics = Metrics()
        self.run_topics = topic_names(settings).run_topics
        self.ready = asyncio.Event()
        self._stack = contextlib.AsyncExitStack()
        self._projector: Projector | None = None
        self._store: RedisViewStore | None = None
        self._stopped = False
        self._early: list[TopicPartition] | None = None
        self._publisher: KafkaPublisher | None = None
        self._batch_failures = Failures()
        self._tick_failures = Failures()
        #: The outage that outlasted the budget; the service stops and its entry raises it.
        self.fatal: UnreachableError | None = None
        self._on_fatal = on_fatal
        self._outages: set[outage.Outage] = set()

    @property
    def projector(self) -> Projector:
        """The started projector."""
        if self._projector is None:
            msg = "the projector runtime is not started"
            raise RuntimeError(msg)
        return self._projector

    def positions(self) -> dict[TopicPartition, int]:
        """The next offset to apply in each partition the projector tracks ({} before start)."""
        return {} if self._projector is None else self._projector.positions

    async def start(self) -> None:
        """Connect to Redis and Kafka and build the projector."""
        s = self.settings
        assert s.kafka_bootstrap is not None
        assert s.redis_url is not None
        codec = EventCodec()
        store = await self._stack.enter_async_context(
            RedisViewStore.from_url(
                s.redis_url,
                key_prefix=s.key_prefix,
                codec=codec,
                retention_ms=s.retention,
                settings=s,
                outage_budget_s=s.outage_budget_s,
            )
        )
        reader = await self._stack.enter_async_context(
            KafkaLogReader(
                s.kafka_bootstrap, connect_timeout_ms=s.kafka_connect_timeout_ms, settings=s
            )
        )
        publisher = await self._stack.enter_async_context(
            KafkaPublisher(s, codec=codec, client_id=f"{s.projector_group}-findings")
        )
        kill = ProjectorKillSwitch(s.projector_kill_point, s.projector_kill_hit)
        applier = Applier(
            store,
            publisher,
            codec,
            metrics=self.metrics,
            cache_size=s.projector_cache_runs,
            partitions=s.run_partitions,
            parked_max=s.projector_parked_max,
            hold_s=s.projector_hold_ms / 1000,
            kill=kill,
        )
        self._store = store
        self._publisher = publisher
        self._projector = Projector(
            store,
            reader,
            publisher,
            applier,
            metrics=self.metrics,
            partitions=s.run_partitions,
            chunk=s.projector_chunk,
            gap_alert_ms=s.projector_gap_alert_ms,
            group=s.projector_group,
            retention_ms=s.retention,
            kill=kill,
        )
        self.ready.set()
        log.info("projector_started", group=s.projector_group, topics=list(self.run_topics))

    async def stop(self) -> None:
        """Close every resource (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self.ready.clear()
        await self._stack.aclose()

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions assigned by the group (only run topics are kept)."""
        mine = [tp for tp in tps if tp[0] in self.run_topics]
        log.info("partitions_assigned", partitions=sorted(f"{t}:{p}" for t, p in mine))
        if self._projector is not None:
            self._projector.assign(mine)
        else:
            self.metrics.assigned = set(mine)
            self._early = mine

    def revoke(self, tps: Iterable[TopicPartition]) -> None:
        """Partitions revoked by the group."""
        if self._projector is not None:
            self._projector.revoke(tps)

    async def process(self, records: Sequence[LogRecord]) -> None:
        """Apply a delivered batch, retrying until it is applied (never dropped); past the
        outage budget it waits for the service to stop instead (the next run applies it)."""
        await self.ready.wait()
        self._adopt_early_assignment()
        delay = _BACKOFF_FIRST_S
        while True:
            if self.fatal is not None:
                await _until_cancelled()
            started = time.monotonic()
            try:
                await self.projector.process(records)
            except Exception as e:  # noqa: BLE001 - outermost loop: retry, never drop a batch
                self.metrics.retries += 1
                await self.projector.reset_delivery()
                if self._gave_up(e, since=started):
                    continue
                error = f"{type(e).__name__}: {e}"
                log.warning(
                    "batch_failed_retrying", error=error, retry_in_s=delay, records=len(records)
                )
                if self._batch_failures.failed(error):
                    await self._alert_stalled(self._batch_failures)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX_S)
            else:
                self._batch_failures.succeeded()
                self._recovered()
                log.debug(
                    "batch_applied",
                    records=len(records),
                    ms=round((time.monotonic() - started) * 1000, 1),
                )
                return

    async def tick(self) -> None:
        """Periodic catch-up, lag and gap alerts; failures are logged and tried next tick."""
        if not self.ready.is_set() or self.fatal is not None:
            return
        self._adopt_early_assignment()
        started = time.monotonic()
        try:
            await self.projector.tick()
        except Exception as e:  # noqa: BLE001 - outermost loop of the timer
            await self.projector.reset_delivery()
            if self._gave_up(e, since=started):
                return
            error = f"{type(e).__name__}: {e}"
            log.warning("tick_failed", error=error)
            if self._tick_failures.failed(error):
                await self._alert_stalled(self._tick_failures)
        else:
            self._tick_failures.succeeded()
            self._recovered()

    def _gave_up(self, error: Exception, *, since: float) -> bool:
        """Count a failure of an unreachable dependency towards its outage; True once the
        outage has outlasted the budget (then :attr:`fatal` is set and the service told)."""
        if self.fatal is not None:
            return True
        unreachable = outage.unreachable_in(error)
        if unreachable is None:
            return False
        budget = self.settings.outage_budget_s
        down = outage.outage_of(unreachable.what, unreachable.endpoint)
        self._outages.add(down)
        if down.failed(unreachable, budget, since=since) < budget:
            return False
        spent = unreachable.waited_s is not None and unreachable.waited_s >= budget
        self.fatal = unreachable if spent else down.past_budget(budget, unreachable)
        log.error("projector_gave_up", error=str(self.fatal), budget_s=budget)
        if self._on_fatal is not None:
            self._on_fatal()
        return True

    def _recovered(self) -> None:
        """Work went through: every outage this runtime was counting is over."""
        for down in self._outages:
            down.recovered()
        self._outages.clear()

    async def _alert_stalled(self, failures: Failures) -> None:
        """One projector.stalled alert per stall (best effort: Kafka may be the cause)."""
        log.error("projector_stalled", failures=failures.count, error=failures.last_error)
        if self._publisher is None:
            return
        alert = stalled_alert(self.settings.projector_group, failures.count, failures.last_error)
        try:
            await self._publisher.publish([alert])
        except Exception as e:  # noqa: BLE001 - the alert is best effort; the log line stays
            log.warning("stall_alert_failed", error=f"{type(e).__name__}: {e}")
        else:
            self.metrics.count_alerts([alert.code])

    async def health(self) -> Health:
        """Whether this projector does its job: connected, Redis answering, partitions assigned,
        its work going through, and no partition behind the log end without moving."""
        found = Health(started=self.ready.is_set() and self._projector is not None)
        if not found.started:
            return found
        if self._store is not None:
            try:
                await within(self._store.client.ping(), _REDIS_PING_S)
            except Exception as e:  # noqa: BLE001 - any failure to answer is "down" here
                found.problems.append(f"redis unreachable ({type(e).__name__})")
        found.problems += outage.problems()
        if not self.metrics.assigned:
            found.problems.append("no partitions assigned")
        for what, failures in (("batches", self._batch_failures), ("ticks", self._tick_failures)):
            if failures.stalled:
                found.problems.append(
                    f"{what} failing: {failures.count} in a row ({failures.last_error[:200]})"
                )
        wedged = self.projector.wedged(self.settings.projector_wedged_after_ms / 1000)
        if wedged:
            found.problems.append(
                "partitions behind the log end without progress: "
                + ", ".join(f"{t}:{p}" for t, p in wedged)
            )
        return found

    async def parked_runs(self) -> int | None:
        """How many runs have events waiting ahead of a gap (for the metrics page); None while
        Redis does not answer within :data:`_PAGE_READ_S`."""
        if self._store is None or self.metrics.namespace is None:
            return 0
        try:
            return await within(self._store.count_parked(self.metrics.namespace), _PAGE_READ_S)
        except (UnreachableError, TimeoutError):
            return None

    def _adopt_early_assignment(self) -> None:
        """Hand an assignment that arrived before start() finished to the projector."""
        if self._early is not None and self._projector is not None:
            self._projector.assign(self._early)
            self._early = None


async def _until_cancelled() -> None:
    """Wait until the stopping service cancels the caller (after the runtime gave up)."""
    await asyncio.get_running_loop().create_future()
