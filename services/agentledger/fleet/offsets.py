"""Which request offsets may be committed: a partition advances only past settled requests.

A request is *settled* once losing it can no longer lose its run: the run's first write is
durable (from then on the reconciler's orphan detection re-queues it if this worker dies), or
the request needed nothing (run finished, another worker holds it, unknown agent …). Requests
run concurrently, so a partition's committable position is its lowest unsettled offset.
Pure bookkeeping; the consumer does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TopicPartition = tuple[str, int]


@dataclass
class _Partition:
    unsettled: set[int] = field(default_factory=set)
    next_offset: int | None = None  # just past the highest offset taken
    committed: int | None = None


class OffsetBook:
    """Offsets taken from each assigned partition and the position safe to commit."""

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, _Partition] = {}

    def assign(self, tp: TopicPartition) -> None:
        """Start tracking a partition (a rebalance gave it to us); idempotent."""
        self._parts.setdefault(tp, _Partition())

    def revoke(self, tp: TopicPartition) -> None:
        """Forget a partition: settling its offsets later commits nothing."""
        self._parts.pop(tp, None)

    def assigned(self) -> set[TopicPartition]:
        """The partitions tracked now."""
        return set(self._parts)

    def take(self, tp: TopicPartition, offset: int) -> None:
        """A request at ``offset`` was handed to a run task."""
        part = self._parts.setdefault(tp, _Partition())
        part.unsettled.add(offset)
        part.next_offset = max(part.next_offset or 0, offset + 1)

    def settle(self, tp: TopicPartition, offset: int) -> bool:
        """The request at ``offset`` can no longer be lost; False if the partition was revoked."""
        part = self._parts.get(tp)
        if part is None:
            return False
        part.unsettled.discard(offset)
        return True

    def position(self, tp: TopicPartition) -> int | None:
        """Where a consumer of the group should restart: the lowest unsettled offset."""
        part = self._parts.get(tp)
        if part is None or part.next_offset is None:
            return None
        return min(part.unsettled) if part.unsettled else part.next_offset

    def due(self, only: set[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Positions that moved past what was last committed (of ``only`` if given)."""
        out: dict[TopicPartition, int] = {}
        for tp, part in self._parts.items():
            if only is not None and tp not in only:
                continue
            pos = self.position(tp)
            if pos is not None and (part.committed is None or pos > part.committed):
                out[tp] = pos
        return out

    def committed(self, positions: dict[TopicPartition, int]) -> None:
        """Record that ``positions`` were committed."""
        for tp, pos in positions.items():
            part = self._parts.get(tp)
            if part is not None:
                part.committed = max(part.committed or 0, pos)

    def unsettled(self) -> int:
        """How many requests are still unsettled, across partitions."""
        return sum(len(p.unsettled) for p in self._parts.values())
