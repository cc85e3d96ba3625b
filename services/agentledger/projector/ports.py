"""What the projector reads the log through, and a publisher that drops findings (rebuilds)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import NamedTuple, Protocol

from agentledger.bus.port import EventPublisher
from agentledger.events.models import Event
from agentledger.views.store import TopicPartition


class Record(NamedTuple):
    """One record of a run topic (value still encoded), as the in-memory log and faust's
    per-event path make it; a named tuple, as cheap as a record object gets in Python. The
    Kafka readers hand over aiokafka's own records instead (see :class:`LogRecord`)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

    @property
    def tp(self) -> TopicPartition:
        """The record's topic-partition."""
        return (self.topic, self.partition)


class LogRecord(Protocol):
    """What the projector reads of a consumed record: a :class:`Record`, or aiokafka's
    ``ConsumerRecord`` as the consumer handed it over. The Kafka paths pass aiokafka's records
    on as they are: a rebuild reads every record of the log, and copying each into a Record
    cost about 2.5 µs a record (DESIGN.md §10, session 13)."""

    @property
    def topic(self) -> str:
        """The record's topic."""
        ...

    @property
    def partition(self) -> int:
        """The record's partition."""
        ...

    @property
    def offset(self) -> int:
        """The record's offset in its partition."""
        ...

    @property
    def key(self) -> bytes | None:
        """The record's key (a run event's is its run id)."""
        ...

    @property
    def value(self) -> bytes | None:
        """The record's value, still encoded."""
        ...


class LogReader(ABC):
    """Reads committed records of given offset ranges (catch-up after a gap, and rebuilds)."""

    @abstractmethod
    def read(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], chunk: int
    ) -> AsyncIterator[Sequence[LogRecord]]:
        """Every committed record with start <= offset < end, per partition in offset order."""

    @abstractmethod
    async def nonempty(
        self, ranges: Mapping[TopicPartition, tuple[int, int]]
    ) -> set[TopicPartition]:
        """The partitions with at least one committed record in their range (a cheap probe)."""

    @abstractmethod
    async def committed_offsets(
        self, group: str, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Where ``group`` will resume each partition (absent: no committed offset)."""

    @abstractmethod
    async def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The read_committed end (last stable offset) of each partition."""

    @abstractmethod
    async def beginning_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The first offset still in each partition."""

    @abstractmethod
    async def partitions(self, topics: Sequence[str]) -> list[TopicPartition]:
        """Every partition of ``topics``."""


class DiscardingPublisher(EventPublisher):
    """Counts and drops findings: a rebuild replays history whose findings were already sent."""

    def __init__(self) -> None:
        self.discarded = 0

    async def publish(self, events: Sequence[Event]) -> None:
        """Count ``events``."""
        self.discarded += len(events)
