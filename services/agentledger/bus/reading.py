"""Reading one run's committed events back from the run topics (read_committed)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord

from agentledger.bus.clients import start_client, stop_client
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import Position
from agentledger.bus.rounds import Rounds
from agentledger.errors import DecodeError, RunLogCorruptError, UnreachableError
from agentledger.events.codec import EventCodec
from agentledger.events.models import RunEvent

FETCH_WAIT_MS = 100
# How long the broker may hold a fetch that has nothing to return. aiokafka's default (500 ms)
# made every read wait for the fetch sent at the position it had before the seek.
BROKER_FETCH_WAIT_MS = 10
# Reads of different runs run side by side on this many consumers (a resume storm of many
# threads or runs in one process no longer queues behind one consumer).
DEFAULT_READERS = 4


class RunReader:
    """Up to ``readers`` read_committed consumers, each assigned per call to a run's partition of
    each run topic.

    A read scans those partitions from their beginning up to the end offsets (the last stable
    offset) taken at the start of the call, keeping the records keyed by the run id. The cost is
    the size of the partitions, which is why resume prefers the projector's view and reads the
    log only when the view is behind.
    """

    def __init__(
        self,
        bootstrap: str,
        run_topics: tuple[str, ...],
        codec: EventCodec,
        *,
        connect_timeout_ms: int,
        read_timeout_ms: int,
        readers: int = DEFAULT_READERS,
    ) -> None:
        self._bootstrap = bootstrap
        self._run_topics = run_topics
        self._codec = codec
        self._connect_timeout_ms = connect_timeout_ms
        self._read_timeout_ms = read_timeout_ms
        self._idle: list[AIOKafkaConsumer] = []
        self._slots = asyncio.Semaphore(readers)
        self._stopped = False
        self._end_offsets = Rounds(self._ask_end_offsets, name="run-reader-end-offsets")

    async def stop(self) -> None:
        """Close the idle consumers; one in use is closed when its read ends (idempotent)."""
        self._stopped = True
        await self._end_offsets.stop()
        idle, self._idle = self._idle, []
        for consumer in idle:
            await stop_client(consumer)

    @contextlib.asynccontextmanager
    async def _consumer(self) -> AsyncIterator[AIOKafkaConsumer]:
        """An idle consumer (or a new one) for one read; dropped if the read fails on Kafka."""
        async with self._slots:
            consumer = self._idle.pop() if self._idle else await self._connect()
            healthy = False
            try:
                yield consumer
                healthy = True
            finally:
                if healthy and not self._stopped:
                    consumer.unsubscribe()
                    self._idle.append(consumer)
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
        floor = at_least or {}
        key = run_key(run_id)
        tps = self._tps(key, partitions)
        found: list[RunEvent] = []
        bad: list[DecodeError] = []
        async with self._consumer() as consumer:
            try:
                consumer.assign(tps)
                starts = await consumer.beginning_offsets(tps)
                ends = await consumer.end_offsets(tps)
                for tp in tps:
                    ends[tp] = max(ends[tp], floor.get((tp.topic, tp.partition), 0))
                for tp in tps:
                    starts[tp] = max(starts[tp], (since or {}).get((tp.topic, tp.partition), 0))
                    consumer.seek(tp, starts[tp])
                remaining = {tp for tp in tps if ends[tp] > starts[tp]}
                deadline = time.monotonic() + self._read_timeout_ms / 1000
                while remaining:
                    if time.monotonic() > deadline:
                        raise UnreachableError(
                            "Kafka",
                            self._bootstrap,
                            f"reading run {run_id} did not reach offsets "
                            f"{ {f'{tp.topic}[{tp.partition}]': ends[tp] for tp in remaining} } "
                            f"within {self._read_timeout_ms} ms; an open transaction of a dead "
                            "writer holds the last stable offset back until its transaction "
                            "timeout (or until a writer with its transactional id restarts)",
                        )
                    batches = await consumer.getmany(*remaining, timeout_ms=FETCH_WAIT_MS)
                    for tp, records in batches.items():
                        for record in records:
                            if record.offset < ends[tp] and record.key == key:
                                self._decode(record, found, bad)
                    for tp in list(remaining):
                        if await consumer.position(tp) >= ends[tp]:
                            remaining.discard(tp)
            except KafkaError as e:
                raise UnreachableError("Kafka", self._bootstrap, f"reading run {run_id}") from e
        if bad:
            raise RunLogCorruptError(run_id, bad)
        found.sort(key=lambda e: e.seq)
        return found

    async def end_positions(self, run_id: str, partitions: int) -> list[Position]:
        """The last stable offset of the run's partition in each run topic.

        Concurrent callers share one ListOffsets request, but only one sent after they asked
        (:class:`Rounds`): the resume barrier needs the end offsets as of its call.
        """
        tps = self._tps(run_key(run_id), partitions)
        ends = await self._end_offsets.ask(tps)
        return [Position(tp.topic, tp.partition, ends[tp]) for tp in tps]

    async def _ask_end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        async with self._consumer() as consumer:
            try:
                ends: dict[TopicPartition, int] = await consumer.end_offsets(tps)
            except KafkaError as e:
                raise UnreachableError("Kafka", self._bootstrap, "asking end offsets") from e
        return ends

    def _tps(self, key: bytes, partitions: int) -> list[TopicPartition]:
        partition = partition_for(key, partitions)
        return [TopicPartition(topic, partition) for topic in self._run_topics]

    def _decode(
        self, record: ConsumerRecord, found: list[RunEvent], bad: list[DecodeError]
    ) -> None:
        topic, partition, offset = record.topic, record.partition, record.offset
        try:
            event = self._codec.decode(
                record.value, topic=topic, partition=partition, offset=offset
            )
        except DecodeError as e:
            bad.append(e)
            return
        if isinstance(event, RunEvent):
            found.append(event)
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
        )
        await start_client(
            consumer,
            bootstrap=self._bootstrap,
            timeout_ms=self._connect_timeout_ms,
            role="run reader",
        )
        return consumer
