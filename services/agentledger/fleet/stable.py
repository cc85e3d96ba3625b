"""The stable barrier: before a run is resumed, no open transaction may hide its committed events.

read_committed readers (the SDK's fold, the projector) stop at the last stable offset (LSO), the
first offset of the oldest open transaction. A worker SIGKILLed or frozen mid-commit leaves its
transaction open until the broker times it out, and every event committed after it on the same
partition stays invisible until then — including events of *other* runs, written by live
workers or by the reconciler. A resume that folded such a run would reuse seqs already taken.
So a resume first waits until the LSO of the run's partitions reaches the high watermark seen
when it started: live transactions end in milliseconds, a dead one within its timeout.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError

from agentledger.bus.clients import bootstrap_of, started, stop_client
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.errors import ConfigurationError, UnreachableError
from agentledger.events.topics import topic_names
from agentledger.kafkaclient import kafka_options
from agentledger.settings import CommonSettings

POLL_S = 0.05
SLOW_S = 0.2
_log = structlog.get_logger(__name__)


class StableBarrier:
    """Two offset-only clients (read_committed, read_uncommitted); an async context manager."""

    def __init__(self, settings: CommonSettings, *, timeout_s: float) -> None:
        self._settings = settings
        self._bootstrap = bootstrap_of(settings)
        self._topics = topic_names(settings).run_topics
        self._timeout_s = timeout_s
        self._committed: AIOKafkaConsumer | None = None
        self._uncommitted: AIOKafkaConsumer | None = None
        self._partitions: int | None = None
        self._lock = asyncio.Lock()
        self.waits = 0  # barriers that had to wait (for logs and tests)

    async def __aenter__(self) -> StableBarrier:
        try:
            await self.start()
        except BaseException:
            await self.stop()  # the first client, when the second did not start
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Connect both clients."""
        self._committed = await self._open("read_committed")
        self._uncommitted = await self._open("read_uncommitted")

    async def stop(self) -> None:
        """Close both clients (idempotent)."""
        for client in (self._committed, self._uncommitted):
            if client is not None:
                await stop_client(client)
        self._committed = self._uncommitted = None

    async def wait(self, run_id: str) -> float:
        """Return once every transaction open on the run's partitions when called has ended;
        the seconds waited. UnreachableError after the timeout (a transaction still open)."""
        committed, uncommitted = self._clients()
        tps = await self._tps(run_id)
        started = time.monotonic()
        try:
            high = await uncommitted.end_offsets(tps)
            while True:
                stable = await committed.end_offsets(tps)
                behind = {tp: high[tp] for tp in tps if stable[tp] < high[tp]}
                if not behind:
                    waited = time.monotonic() - started
                    if waited > SLOW_S:
                        self.waits += 1
                        _log.info("stable_barrier_waited", run_id=run_id, waited_s=round(waited, 3))
                    return waited
                if time.monotonic() - started > self._timeout_s:
                    where = {f"{tp.topic}[{tp.partition}]": o for tp, o in behind.items()}
                    msg = (
                        f"run {run_id}: transactions still open on {where} after "
                        f"{self._timeout_s:.0f} s (a frozen writer, or transaction.timeout.ms "
                        "too long); not resuming from a view that may miss committed events"
                    )
                    raise UnreachableError("Kafka", self._bootstrap, msg)
                await asyncio.sleep(POLL_S)
        except KafkaError as e:
            raise UnreachableError("Kafka", self._bootstrap, f"offsets of run {run_id}") from e

    async def _tps(self, run_id: str) -> list[TopicPartition]:
        if self._partitions is None:
            async with self._lock:
                self._partitions = await self._count_partitions()
        part = partition_for(run_key(run_id), self._partitions)
        return [TopicPartition(topic, part) for topic in self._topics]

    async def _count_partitions(self) -> int:
        committed, _ = self._clients()
        try:
            # the consumer has no public awaitable metadata call; its client does
            cluster = await committed._client.fetch_all_metadata()
        except KafkaError as e:
            raise UnreachableError("Kafka", self._bootstrap, "topic metadata") from e
        counts = {t: cluster.partitions_for_topic(t) for t in self._topics}
        missing = sorted(t for t, parts in counts.items() if not parts)
        if missing:
            msg = f"run topics {missing} do not exist (run: agentledger topics ensure)"
            raise ConfigurationError(msg)
        sizes = {len(parts) for parts in counts.values() if parts}
        if len(sizes) != 1:
            found = {t: len(p or ()) for t, p in counts.items()}
            msg = f"run topics are not co-partitioned: {found}"
            raise ConfigurationError(msg)
        return sizes.pop()

    async def _open(self, isolation: str) -> AIOKafkaConsumer:
        return await started(
            lambda: AIOKafkaConsumer(
                bootstrap_servers=self._bootstrap,
                group_id=None,
                enable_auto_commit=False,
                isolation_level=isolation,
                client_id=f"agentledger-stable-{isolation}",
                **kafka_options(self._settings),
            ),
            bootstrap=self._bootstrap,
            timeout_ms=self._settings.kafka_connect_timeout_ms,
            role="offsets client",
            budget_s=self._settings.outage_budget_s,
            settings=self._settings,
        )

    def _clients(self) -> tuple[AIOKafkaConsumer, AIOKafkaConsumer]:
        if self._committed is None or self._uncommitted is None:
            raise UnreachableError("Kafka", self._bootstrap, "the stable barrier is not started")
        return self._committed, self._uncommitted
