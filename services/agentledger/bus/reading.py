"""Reading one run's committed events back from the run topics (read_committed)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from agentledger.bus.clients import start_client, stop_client
from agentledger.bus.offsets import EARLIEST, LATEST, list_offsets
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import Position
from agentledger.bus.rounds import Rounds
from agentledger.bus.skips import unskipped
from agentledger.errors import DecodeError, RunLogCorruptError, UnreachableError
from agentledger.events.codec import EventCodec
from agentledger.events.models import RecordSkipped, RunEvent
from agentledger.kafkaclient import kafka_options
from agentledger.outage import ride_out
from agentledger.settings import CommonSettings
from agentledger.tasks import within
from agentledger.views.fold import malformed

FETCH_WAIT_MS = 100
# How long the broker may hold a fetch that has nothing to return. aiokafka's default (500 ms)
# made every read wait for the fetch sent at the position it had before the seek.
BROKER_FETCH_WAIT_MS = 10
#: One read's need: the run's key, a partition, and the offsets [start, end) to scan there.
Want = tuple[bytes, TopicPartition, int, int]

T = TypeVar("T")


class RunReader:
    """Reads runs back from their partitions of the run topics with read_committed consumers.

    A read scans the run's partitions from their beginning (or from ``since``) up to the end
    offsets (the last stable offset) taken at the start of the call, keeping the records keyed
    by the run id. Reads waiting together share one scan (:meth:`_scan`), and beginning and end
    offsets are asked once per round for every caller waiting (:class:`Rounds`), on a consumer
    of their own, or over a client already connected (``offsets_over``: the event log's
    producer) whenever it gives one. The cost is the size of what is scanned, which is why
    resume reads only the tail the projector's view has not applied. Every read is repeated
    while the broker is unreachable, up to ``outage_budget_s`` (reads are safe to repeat).
    """

    def __init__(
        self,
        bootstrap: str,
        run_topics: tuple[str, ...],
        codec: EventCodec,
        *,
        connect_timeout_ms: int,
        read_timeout_ms: int,
        settings: CommonSettings | None = None,
        outage_budget_s: float = 0.0,
        offsets_over: Callable[[], object | None] | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._offsets_over = offsets_over
        self._security = settings
        self._budget_s = outage_budget_s
        self._run_topics = run_topics
        self._codec = codec
        self._connect_timeout_ms = connect_timeout_ms
        self._read_timeout_ms = read_timeout_ms
        self._scanner: AIOKafkaConsumer | None = None
        self._stopped = False
        self._end_offsets = Rounds(self._ask_end_offsets, name="run-reader-end-offsets")
        self._begin_offsets = Rounds(self._ask_begin_offsets, name="run-reader-begin-offsets")
        self._scans = Rounds(self._scan, name="run-reader-scans")
        self._offsets_client: AIOKafkaConsumer | None = None
        self._offsets_lock = asyncio.Lock()

    async def stop(self) -> None:
        """Cancel reads in progress and close the consumers (idempotent)."""
        self._stopped = True
        await self._end_offsets.stop()
        await self._begin_offsets.stop()
        await self._scans.stop()
        for client in (self._offsets_client, self._scanner):
            if client is not None:
                await stop_client(client)
        self._offsets_client = self._scanner = None

    @contextlib.asynccontextmanager
    async def _consumer(self) -> AsyncIterator[AIOKafkaConsumer]:
        """The scanning consumer (one scan at a time: :class:`Rounds`); dropped if a scan fails."""
        consumer = self._scanner if self._scanner is not None else await self._connect()
        self._scanner = None
        healthy = False
        try:
            yield consumer
            healthy = True
        finally:
            if healthy and not self._stopped:
                consumer.unsubscribe()
                self._scanner = consumer
            else:
                await stop_client(consumer)

    async def read_run(
        self,
        run_id: str,
        partitions: int,
        at_least: Mapping[tuple[str, int], int] | None = None,
        *,
        since: Mapping[tuple[str, int], int] | None = None,
    ) -> list[RunEvent]:
        """The run's committed events, sorted by seq; RunLogCorruptError if any is undecodable.

        ``at_least`` holds end offsets the caller knows are committed (its own writes): the read
        goes on until it has passed them even if the last stable offset still lags behind.
        ``since`` holds the first offset to read per partition (default: its beginning).
        """
        return await self._riding_out(
            lambda: self._read_run(run_id, partitions, at_least, since=since)
        )

    async def _riding_out(self, call: Callable[[], Awaitable[T]]) -> T:
        return await ride_out(
            call, dependency="Kafka", endpoint=self._bootstrap, budget_s=self._budget_s
        )

    async def _read_run(
        self,
        run_id: str,
        partitions: int,
        at_least: Mapping[tuple[str, int], int] | None = None,
        *,
        since: Mapping[tuple[str, int], int] | None = None,
    ) -> list[RunEvent]:
        floor = at_least or {}
        key = run_key(run_id)
        tps = self._tps(key, partitions)
        ends = await self._end_offsets.ask(tps)
        starts = await self._begin_offsets.ask(tps)
        wants: list[Want] = []
        for tp in tps:
            end = max(ends[tp], floor.get((tp.topic, tp.partition), 0))
            start = max(starts[tp], (since or {}).get((tp.topic, tp.partition), 0))
            if end > start:
                wants.append((key, tp, start, end))
        if not wants:
            return []
        records = await self._scans.ask(wants)
        found: list[RunEvent] = []
        bad: list[DecodeError] = []
        skips: list[RecordSkipped] = []
        for want in wants:
            for record in records[want]:
                self._decode(run_id, record, found, bad, skips)
        bad = unskipped(run_id, bad, skips)
        if bad:
            raise RunLogCorruptError(run_id, bad)
        # a record under the run's key whose event names another run is misplaced: the
        # projector dead-letters it (agentledger.projector.applier.misplaced), so it is no
        # event of this run here either
        found = [e for e in found if e.run_id == run_id]
        found.sort(key=lambda e: e.seq)
        return found

    async def _scan(self, wants: list[Want]) -> dict[Want, list[ConsumerRecord]]:
        """One pass over the partitions every waiting read needs, each record routed to the reads
        whose key and offset range it is in: concurrent reads of runs sharing partitions (a
        resume storm) scan those partitions once, not once per run."""
        spans: dict[TopicPartition, tuple[int, int]] = {}
        routes: dict[tuple[bytes, TopicPartition], list[Want]] = {}
        for want in wants:
            key, tp, start, end = want
            lo, hi = spans.get(tp, (start, end))
            spans[tp] = (min(lo, start), max(hi, end))
            routes.setdefault((key, tp), []).append(want)
        found: dict[Want, list[ConsumerRecord]] = {want: [] for want in wants}
        async with self._consumer() as consumer:
            try:
                consumer.assign(list(spans))
                for tp, (lo, _) in spans.items():  # before any await: the first fetch is here
                    consumer.seek(tp, lo)
                remaining = set(spans)
                deadline = time.monotonic() + self._read_timeout_ms / 1000
                while remaining:
                    if time.monotonic() > deadline:
                        late = {f"{tp.topic}[{tp.partition}]": spans[tp][1] for tp in remaining}
                        raise UnreachableError(
                            "Kafka",
                            self._bootstrap,
                            f"reading runs did not reach offsets {late} within "
                            f"{self._read_timeout_ms} ms; an open transaction of a dead writer "
                            "holds the last stable offset back until its transaction timeout "
                            "(or until a writer with its transactional id restarts)",
                        )
                    batches = await consumer.getmany(*remaining, timeout_ms=FETCH_WAIT_MS)
                    for tp, batch in batches.items():
                        for record in batch:
                            for want in routes.get((record.key, tp), ()):
                                if want[2] <= record.offset < want[3]:
                                    found[want].append(record)
                    for tp in list(remaining):
                        if await consumer.position(tp) >= spans[tp][1]:
                            remaining.discard(tp)
            except KafkaError as e:
                raise UnreachableError("Kafka", self._bootstrap, "reading runs") from e
        return found

    async def end_positions(self, run_id: str, partitions: int) -> list[Position]:
        """The last stable offset of the run's partition in each run topic.

        Concurrent callers share one ListOffsets request, but only one sent after they asked
        (:class:`Rounds`): the resume barrier needs the end offsets as of its call.
        """
        return (await self.runs_end_positions([run_id], partitions))[run_id]

    async def runs_end_positions(
        self, run_ids: Sequence[str], partitions: int
    ) -> dict[str, list[Position]]:
        """:meth:`end_positions` of each run, from one round (as one run's: after the call)."""
        wanted = {run_id: self._tps(run_key(run_id), partitions) for run_id in run_ids}
        tps = list(dict.fromkeys(tp for each in wanted.values() for tp in each))
        ends = await self._riding_out(lambda: self._end_offsets.ask(tps))
        return {
            run_id: [Position(tp.topic, tp.partition, ends[tp]) for tp in each]
            for run_id, each in wanted.items()
        }

    async def all_end_offsets(self, partitions: int) -> dict[TopicPartition, int]:
        """The last stable offset of every partition of every run topic."""
        tps = [TopicPartition(t, p) for t in self._run_topics for p in range(partitions)]
        return await self._riding_out(lambda: self._end_offsets.ask(tps))

    async def _ask_end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._ask_offsets(tps, LATEST, "asking end offsets")

    async def _ask_begin_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._ask_offsets(tps, EARLIEST, "asking beginning offsets")

    async def _ask_offsets(
        self, tps: list[TopicPartition], timestamp: int, doing: str
    ) -> dict[TopicPartition, int]:
        """Offsets over the client ``offsets_over`` gives, else over the offsets consumer."""
        shared = self._offsets_over() if self._offsets_over is not None else None
        if shared is not None:
            try:
                return await list_offsets(shared, tps, timestamp, self._read_timeout_ms / 1000)
            except KafkaError as e:
                raise UnreachableError("Kafka", self._bootstrap, doing) from e
        client = await self._offsets()
        try:
            offsets: dict[TopicPartition, int] = await (
                client.end_offsets(tps) if timestamp == LATEST else client.beginning_offsets(tps)
            )
        except KafkaError as e:
            await self._drop_offsets_client(client)
            raise UnreachableError("Kafka", self._bootstrap, doing) from e
        return offsets

    async def _offsets(self) -> AIOKafkaConsumer:
        """The consumer that asks offsets (never assigned, so it fetches nothing)."""
        async with self._offsets_lock:
            if self._offsets_client is None:
                self._offsets_client = await self._connect()
            return self._offsets_client

    async def _drop_offsets_client(self, client: AIOKafkaConsumer) -> None:
        """Forget a consumer that failed (the next ask connects a new one)."""
        current = self._offsets_client
        if current is not None and current is client:
            self._offsets_client = None
            await stop_client(current)

    def _tps(self, key: bytes, partitions: int) -> list[TopicPartition]:
        partition = partition_for(key, partitions)
        return [TopicPartition(topic, partition) for topic in self._run_topics]

    def _decode(
        self,
        run_id: str,
        record: ConsumerRecord,
        found: list[RunEvent],
        bad: list[DecodeError],
        skips: list[RecordSkipped],
    ) -> None:
        topic, partition, offset = record.topic, record.partition, record.offset
        try:
            event = self._codec.decode(
                record.value, topic=topic, partition=partition, offset=offset
            )
        except DecodeError as e:
            bad.append(e)
            return
        wrong = malformed(event) if isinstance(event, RunEvent) and event.run_id == run_id else None
        if wrong is not None:  # one the fold cannot read: the projector dead-letters it
            bad.append(DecodeError(wrong, topic=topic, partition=partition, offset=offset))
        elif isinstance(event, RunEvent):
            found.append(event)
        elif isinstance(event, RecordSkipped):
            skips.append(event)
        else:
            bad.append(
                DecodeError(
                    f"{type(event).__name__} is not a run event",
                    topic=topic,
                    partition=partition,
                    offset=offset,
                )
            )

    async def _connect(self) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            isolation_level="read_committed",
            enable_auto_commit=False,
            group_id=None,
            client_id="agentledger-run-reader",
            fetch_max_wait_ms=BROKER_FETCH_WAIT_MS,
            **kafka_options(self._security),
        )
        await start_client(
            consumer,
            bootstrap=self._bootstrap,
            timeout_ms=self._connect_timeout_ms,
            role="run reader",
            settings=self._security,
        )
        await self._learn_run_topics(consumer)
        return consumer

    async def _learn_run_topics(self, consumer: AIOKafkaConsumer) -> None:
        """Ask the metadata of every run topic in one request. Left alone, aiokafka learns an
        unknown topic only when an offsets request fails on it, then sleeps retry_backoff_ms
        (100 ms) before the next try: one topic per try, 300 ms before a first resume."""
        client = getattr(consumer, "_client", None)
        set_topics = getattr(client, "set_topics", None)
        if set_topics is None:  # aiokafka internals changed: the slow path still works
            return
        try:
            await within(set_topics(list(self._run_topics)), self._read_timeout_ms / 1000)
        except (TimeoutError, KafkaError) as e:
            await stop_client(consumer)
            raise UnreachableError("Kafka", self._bootstrap, "run topics' metadata") from e
