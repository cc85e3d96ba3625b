"""Events a run cannot apply yet, held in memory while their gap is likely to fill (DESIGN.md §16).

A run's events are spread over the three run topics of its partition number, and a fetch hands
them over topic by topic: a run's later events often come a batch before the earlier ones of
another topic. Instead of parking them in the store (and writing the run again when the gap
fills), the applier holds them here, with their records. Each partition's progress stops at its
lowest held record (:meth:`HeldEvents.below`), so a crash loses nothing: the redo reads them
from the log again. A hold ends when the run applies the events, or when it expires: after the
hold time if no run topic of the partition number has records left to deliver (then the gap is
not about to fill), else after :data:`HOLD_MAX_S`; the expired events are parked as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from agentledger.events.models import RunEvent
from agentledger.projector.ports import LogRecord
from agentledger.views.store import TopicPartition

if TYPE_CHECKING:
    from agentledger.projector.applier import Decoded

#: However far behind the other run topics are, a hold ends after this long.
HOLD_MAX_S = 30.0
#: Events held at most; past it, waiting events are parked at once.
HELD_MAX = 50_000

Held = list[tuple[RunEvent, LogRecord]]


class HeldEvents:
    """The held events of runs, by partition number, oldest hold first."""

    def __init__(
        self, hold_s: float, *, hold_max_s: float = HOLD_MAX_S, capacity: int = HELD_MAX
    ) -> None:
        self.hold_s = hold_s
        self.hold_max_s = max(hold_s, hold_max_s)
        self.capacity = capacity
        self.count = 0
        self._events: dict[str, Held] = {}
        # partition number -> run -> when its hold began (insertion order: oldest first)
        self._since: dict[int, dict[str, float]] = {}

    def __bool__(self) -> bool:
        return bool(self._events)

    @property
    def partitions(self) -> set[int]:
        """Partition numbers with a held event (their progress stops before it)."""
        return {p for p, runs in self._since.items() if any(r in self._events for r in runs)}

    def expired(self, partition: int, run_id: str, now: float, lagging: set[int]) -> bool:
        """True when the run's hold (if any) is over: past the hold time with nothing left to
        deliver on its partition number, or past :data:`HOLD_MAX_S`."""
        since = self._since.get(partition, {}).get(run_id)
        return since is not None and self._over(since, partition, now, lagging)

    def _over(self, since: float, partition: int, now: float, lagging: set[int]) -> bool:
        age = now - since
        return age >= self.hold_max_s or (age >= self.hold_s and partition not in lagging)

    def due(self, now: float, lagging: set[int]) -> bool:
        """True when some held event's hold is over (the next apply parks it)."""
        for partition, runs in self._since.items():
            for run_id, since in runs.items():
                if run_id in self._events:
                    if self._over(since, partition, now, lagging):
                        return True
                    break  # the oldest hold of this partition number is not over
        return False

    def take(self, batch: Decoded, now: float, lagging: set[int]) -> None:
        """Move into ``batch`` the held events of its runs and of every hold that is over; they
        are folded again, and what still waits is held again (same start) or parked."""
        for run_id, events in batch.runs.items():
            held = self._events.pop(run_id, None)
            if held is not None:
                self._into(batch, events, held)
        for partition, runs in self._since.items():
            for run_id, since in runs.items():
                if not self._over(since, partition, now, lagging):
                    break
                held = self._events.pop(run_id, None)
                if held is not None:
                    self._into(batch, batch.runs.setdefault(run_id, []), held)

    def _into(self, batch: Decoded, events: list[RunEvent], held: Held) -> None:
        self.count -= len(held)
        events[:0] = [e for e, _ in held]
        for event, rec in held:
            batch.where[event.event_id] = rec

    def room(self) -> int:
        """How many more events may be held."""
        return self.capacity - self.count

    def hold(self, run_id: str, partition: int, held: Held, now: float) -> None:
        """Hold ``held`` for the run (its hold keeps the start it had)."""
        self._events[run_id] = held
        self.count += len(held)
        self._since.setdefault(partition, {}).setdefault(run_id, now)

    def release(self, run_id: str, partition: int) -> None:
        """The run holds nothing any more."""
        held = self._events.pop(run_id, None)
        if held is not None:
            self.count -= len(held)
        runs = self._since.get(partition)
        if runs is not None:
            runs.pop(run_id, None)

    def drop(self, run_id: str) -> None:
        """Forget the run's held events, keeping its hold's start (they are being refolded)."""
        held = self._events.pop(run_id, None)
        if held is not None:
            self.count -= len(held)

    def below(self, progress: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """``progress`` with each partition stopped at its lowest held record, if any."""
        if not self._events:
            return dict(progress)
        lowest: dict[TopicPartition, int] = {}
        for partition in {p for _, p in progress}:
            for run_id in self._since.get(partition, ()):
                for _, rec in self._events.get(run_id, ()):
                    tp = (rec.topic, rec.partition)
                    if rec.offset < lowest.get(tp, rec.offset + 1):
                        lowest[tp] = rec.offset
        return {tp: min(offset, lowest.get(tp, offset)) for tp, offset in progress.items()}

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Drop the held events of partitions no longer ours (their progress never passed them:
        the next owner reads them from the log)."""
        gone = set(tps)
        for partition in {p for _, p in gone}:
            runs = self._since.get(partition, {})
            for run_id in list(runs):
                held = self._events.get(run_id, [])
                kept = [(e, r) for e, r in held if (r.topic, r.partition) not in gone]
                self.count -= len(held) - len(kept)
                if kept:
                    self._events[run_id] = kept
                else:
                    self._events.pop(run_id, None)
                    del runs[run_id]

    def clear(self) -> None:
        """Forget everything held."""
        self._events.clear()
        self._since.clear()
        self.count = 0
