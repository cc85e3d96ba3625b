"""In-memory twins of the projector's ports, for unit tests: a partitioned log and a publisher."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

from agentledger.bus.port import EventPublisher
from agentledger.events.models import Event
from agentledger.projector.ports import LogReader, Record
from agentledger.views.store import TopicPartition


class MemoryLog(LogReader):
    """Records per partition with Kafka-like offsets; ``skip`` leaves offset gaps (markers)."""

    def __init__(self) -> None:
        self._records: dict[TopicPartition, list[Record]] = {}
        self._next: dict[TopicPartition, int] = {}
        self._start: dict[TopicPartition, int] = {}
        self.committed: dict[str, dict[TopicPartition, int]] = {}

    def add_partitions(self, topic: str, count: int) -> None:
        """Create ``count`` empty partitions of ``topic``."""
        for p in range(count):
            self._records.setdefault((topic, p), [])
            self._next.setdefault((topic, p), 0)
            self._start.setdefault((topic, p), 0)

    def append(
        self, topic: str, partition: int, value: bytes | None, key: bytes | None = None
    ) -> Record:
        """Append one record and return it (with its offset)."""
        tp = (topic, partition)
        rec = Record(topic, partition, self._next.get(tp, 0), key, value)
        self._records.setdefault(tp, []).append(rec)
        self._next[tp] = rec.offset + 1
        self._start.setdefault(tp, 0)
        return rec

    def skip(self, topic: str, partition: int, n: int = 1) -> None:
        """Advance the partition's end without a record (like a transaction marker)."""
        tp = (topic, partition)
        self._next[tp] = self._next.get(tp, 0) + n

    def truncate(self, topic: str, partition: int, before: int) -> None:
        """Drop records below ``before`` (retention)."""
        tp = (topic, partition)
        self._records[tp] = [r for r in self._records.get(tp, []) if r.offset >= before]
        self._start[tp] = before

    def records(self, tp: TopicPartition, start: int = 0) -> list[Record]:
        """The partition's records from ``start`` on."""
        return [r for r in self._records.get(tp, []) if r.offset >= start]

    async def read(
        self, ranges: Mapping[TopicPartition, tuple[int, int]], chunk: int
    ) -> AsyncIterator[list[Record]]:
        """See :meth:`LogReader.read`."""
        found = [
            r
            for tp, (start, end) in sorted(ranges.items())
            for r in self._records.get(tp, [])
            if start <= r.offset < end
        ]
        for i in range(0, len(found), chunk):
            yield found[i : i + chunk]

    async def nonempty(
        self, ranges: Mapping[TopicPartition, tuple[int, int]]
    ) -> set[TopicPartition]:
        """See :meth:`LogReader.nonempty`."""
        return {
            tp
            for tp, (start, end) in ranges.items()
            if any(start <= r.offset < end for r in self._records.get(tp, []))
        }

    async def committed_offsets(
        self, group: str, tps: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """See :meth:`LogReader.committed_offsets` (set them in ``self.committed``)."""
        known = self.committed.get(group, {})
        return {tp: known[tp] for tp in tps if tp in known}

    async def end_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """See :meth:`LogReader.end_offsets`."""
        return {tp: self._next.get(tp, 0) for tp in tps}

    async def beginning_offsets(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """See :meth:`LogReader.beginning_offsets`."""
        return {tp: self._start.get(tp, 0) for tp in tps}

    async def partitions(self, topics: Sequence[str]) -> list[TopicPartition]:
        """See :meth:`LogReader.partitions`."""
        return sorted(tp for tp in self._records if tp[0] in topics)


class CollectingPublisher(EventPublisher):
    """Keeps every published event in order (alerts, dead letters)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def publish(self, events: Sequence[Event]) -> None:
        """Remember ``events``."""
        self.events.extend(events)
