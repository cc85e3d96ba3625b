"""An async iterator of decoded records for service loops and CLIs (read_committed).

A record that cannot be decoded is yielded with its ``error`` (a DecodeError naming topic,
partition and offset) and its raw bytes instead of raising, so the caller can dead-letter it
and go on: nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from types import TracebackType

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import ConsumerRecord as ConsumerRecordT
from aiokafka.structs import OffsetAndMetadata

from agentledger.bus.clients import bootstrap_of, start_client, stop_client
from agentledger.bus.port import Position
from agentledger.errors import ConfigurationError, DecodeError, UnreachableError
from agentledger.events.codec import EventCodec
from agentledger.events.models import Event
from agentledger.kafkaclient import kafka_options
from agentledger.settings import CommonSettings

FETCH_WAIT_MS = 200


@dataclass(frozen=True)
class Consumed:
    """One record: its place, raw bytes, and either the decoded event or why it is not one."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    event: Event | None
    error: DecodeError | None

    @property
    def next_position(self) -> Position:
        """The position just after this record (what a consumer commits once it is handled)."""
        return Position(self.topic, self.partition, self.offset + 1)


class KafkaEventConsumer:
    """read_committed consumer of ``topics``; an async context manager and an async iterator.

    With ``group_id`` it joins that consumer group (offsets committed by :meth:`commit`, never
    automatically); without, it is assigned every partition of the topics. ``from_beginning``
    picks where a partition with no committed offset starts; ``until_end`` (no group only) stops the
    iteration at the end offsets seen when it started, as ``alerts tail`` without ``--follow``.
    """

    def __init__(
        self,
        settings: CommonSettings,
        topics: Sequence[str],
        *,
        group_id: str | None = None,
        from_beginning: bool = True,
        until_end: bool = False,
        codec: EventCodec | None = None,
        client_id: str = "agentledger-consumer",
    ) -> None:
        if until_end and group_id is not None:
            msg = "until_end needs a consumer without group_id (it reads every partition itself)"
            raise ConfigurationError(msg)
        self._settings = settings
        self._bootstrap = bootstrap_of(settings)
        self._topics = list(topics)
        self._group_id = group_id
        self._from_beginning = from_beginning
        self._until_end = until_end
        self._codec = codec or EventCodec()
        self._client_id = client_id
        self._consumer: AIOKafkaConsumer | None = None
        self._ends: dict[TopicPartition, int] = {}
        self._handled: dict[TopicPartition, int] = {}
        self._stopped = False

    async def __aenter__(self) -> KafkaEventConsumer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Connect (UnreachableError within the connect timeout), subscribe or assign."""
        consumer = AIOKafkaConsumer(
            *self._topics,
            bootstrap_servers=self._bootstrap,
            group_id=self._group_id,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest" if self._from_beginning else "latest",
            client_id=self._client_id,
            **kafka_options(self._settings),
        )
        await start_client(
            consumer,
            bootstrap=self._bootstrap,
            timeout_ms=self._settings.kafka_connect_timeout_ms,
            role="consumer",
            settings=self._settings,
        )
        self._consumer = consumer
        if self._until_end:
            try:
                await self._snapshot_ends(consumer)
            except KafkaError as e:
                await self.stop()
                raise UnreachableError("Kafka", self._bootstrap, f"end offsets: {e!r}") from e
            except BaseException:
                await self.stop()
                raise

    async def stop(self) -> None:
        """Close the consumer (idempotent); offsets not committed are simply read again."""
        if self._stopped:
            return
        self._stopped = True
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await stop_client(consumer)

    async def commit(self) -> None:
        """Commit, for the group, the position after every record this iterator yielded."""
        consumer = self._running()
        if self._group_id is None or not self._handled:
            return
        offsets = {tp: OffsetAndMetadata(offset, "") for tp, offset in self._handled.items()}
        try:
            await consumer.commit(offsets)
        except KafkaError as e:
            raise UnreachableError("Kafka", self._bootstrap, f"committing offsets: {e!r}") from e

    def __aiter__(self) -> AsyncIterator[Consumed]:
        return self._records()

    async def _records(self) -> AsyncIterator[Consumed]:
        consumer = self._running()
        while True:
            if self._until_end and await self._at_end(consumer):
                return
            try:
                batches = await consumer.getmany(timeout_ms=FETCH_WAIT_MS)
            except KafkaError as e:
                raise UnreachableError("Kafka", self._bootstrap, f"fetching: {e!r}") from e
            for tp, records in batches.items():
                for record in records:
                    if self._until_end and record.offset >= self._ends.get(tp, 0):
                        continue
                    # Marked before the yield: a commit() made while handling this record
                    # includes it (the caller commits after handling).
                    self._handled[tp] = record.offset + 1
                    yield self._decode(record)

    def _decode(self, record: ConsumerRecordT) -> Consumed:
        event: Event | None = None
        error: DecodeError | None = None
        try:
            event = self._codec.decode(
                record.value, topic=record.topic, partition=record.partition, offset=record.offset
            )
        except DecodeError as e:
            error = e
        return Consumed(
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            timestamp=record.timestamp,
            key=record.key,
            value=record.value,
            event=event,
            error=error,
        )

    async def _snapshot_ends(self, consumer: AIOKafkaConsumer) -> None:
        # Without a group, aiokafka assigns every partition of the topics at start.
        tps = list(consumer.assignment())
        missing = set(self._topics) - {tp.topic for tp in tps}
        if missing:
            msg = f"topics {sorted(missing)} do not exist (run: agentledger topics ensure)"
            raise ConfigurationError(msg)
        self._ends = dict(await consumer.end_offsets(tps))

    async def _at_end(self, consumer: AIOKafkaConsumer) -> bool:
        for tp, end in self._ends.items():
            if await consumer.position(tp) < end:
                return False
        return True

    def _running(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            msg = "the consumer is not running (use it inside `async with`)"
            raise ConfigurationError(msg)
        return self._consumer
