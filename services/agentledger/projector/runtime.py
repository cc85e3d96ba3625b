"""The projector's resources (Redis store, Kafka reader and publisher) and its retry loop.

A batch is never dropped: any failure is logged, the delivery state is reset (so the next
attempt re-anchors on the progress Redis holds), and the batch is retried with backoff. This is
the service's outermost loop, the one place that catches broadly.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Sequence

import structlog

from agentledger.bus.publisher import KafkaPublisher
from agentledger.events.codec import EventCodec
from agentledger.events.topics import topic_names
from agentledger.projector.applier import Applier
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.metrics import Metrics
from agentledger.projector.ports import Record
from agentledger.projector.runner import Projector
from agentledger.projector.settings import ProjectorSettings
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import TopicPartition

log = structlog.get_logger(__name__)

_BACKOFF_FIRST_S = 0.1
_BACKOFF_MAX_S = 5.0


class ProjectorRuntime:
    """Everything one projector process holds open; start() once, stop() idempotent."""

    def __init__(self, settings: ProjectorSettings) -> None:
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

    @property
    def projector(self) -> Projector:
        """The started projector."""
        if self._projector is None:
            msg = "the projector runtime is not started"
            raise RuntimeError(msg)
        return self._projector

    async def start(self) -> None:
        """Connect to Redis and Kafka and build the projector."""
        s = self.settings
        assert s.kafka_bootstrap is not None
        assert s.redis_url is not None
        codec = EventCodec()
        store = await self._stack.enter_async_context(
            RedisViewStore.from_url(
                s.redis_url, key_prefix=s.key_prefix, codec=codec, retention_ms=s.retention
            )
        )
        reader = await self._stack.enter_async_context(
            KafkaLogReader(s.kafka_bootstrap, connect_timeout_ms=s.kafka_connect_timeout_ms)
        )
        publisher = await self._stack.enter_async_context(
            KafkaPublisher(s, codec=codec, client_id=f"{s.projector_group}-findings")
        )
        applier = Applier(
            store, publisher, codec, metrics=self.metrics, cache_size=s.projector_cache_runs
        )
        self._store = store
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

    async def process(self, records: Sequence[Record]) -> None:
        """Apply a delivered batch, retrying until it is applied (never dropped)."""
        await self.ready.wait()
        self._adopt_early_assignment()
        delay = _BACKOFF_FIRST_S
        while True:
            started = time.monotonic()
            try:
                await self.projector.process(records)
            except Exception as e:  # noqa: BLE001 - outermost loop: retry, never drop a batch
                self.metrics.retries += 1
                await self.projector.reset_delivery()
                log.warning(
                    "batch_failed_retrying",
                    error=f"{type(e).__name__}: {e}",
                    retry_in_s=delay,
                    records=len(records),
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX_S)
            else:
                log.debug(
                    "batch_applied",
                    records=len(records),
                    ms=round((time.monotonic() - started) * 1000, 1),
                )
                return

    async def tick(self) -> None:
        """Periodic catch-up, lag and gap alerts; failures are logged and tried next tick."""
        if not self.ready.is_set():
            return
        self._adopt_early_assignment()
        try:
            await self.projector.tick()
        except Exception as e:  # noqa: BLE001 - outermost loop of the timer
            await self.projector.reset_delivery()
            log.warning("tick_failed", error=f"{type(e).__name__}: {e}")

    async def parked_runs(self) -> int:
        """How many runs have events waiting ahead of a gap (for the metrics page)."""
        if self._store is None or self.metrics.namespace is None:
            return 0
        return len(await self._store.overdue_parked(self.metrics.namespace, 2**62))

    def _adopt_early_assignment(self) -> None:
        """Hand an assignment that arrived before start() finished to the projector."""
        if self._early is not None and self._projector is not None:
            self._projector.assign(self._early)
            self._early = None
