"""Rebuild's fold: whole partitions folded in memory, each run's final view written once.

A rebuild reads every record of a partition before anyone reads the namespace it fills, so
there is no reason to write a run after each chunk as the live projector does. The records of
one partition number (that partition of every run topic: a run's events all land there) are
decoded and folded per run in memory, exactly as :class:`~.applier.Applier` folds them (the same
:func:`~agentledger.views.fold.fold`, parked events carried from chunk to chunk); then every run
of the partition is written once, in pipelined slices, while the next partition is being read.
The namespace's progress is recorded once, after the last write: a crash mid-rebuild leaves a
namespace that was never live and is never used.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agentledger.events.codec import EventCodec
from agentledger.events.models import RunEvent
from agentledger.projector.applier import decode_records, index_update
from agentledger.projector.parking import DEFAULT_PARKED_MAX, bounded_parked, unique_parked
from agentledger.projector.ports import LogReader, Record
from agentledger.views.fold import fold
from agentledger.views.model import RunView
from agentledger.views.store import IndexUpdate, RunWrite, TopicPartition, ViewStore

#: Runs per pipelined write, and how many such writes are in flight at once.
WRITE_SLICE = 500
WRITES_IN_FLIGHT = 4


@dataclass(frozen=True)
class Progress:
    """How far a rebuild is, for the operator watching it."""

    records: int
    total: int
    seconds: float

    @property
    def rate(self) -> float:
        """Records per second so far."""
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the rate so far (None before the first record)."""
        rate = self.rate
        return max(0.0, (self.total - self.records) / rate) if rate > 0 else None

    def line(self) -> str:
        """One human line: records, rate, ETA."""
        eta = "?" if self.eta_s is None else f"{self.eta_s:.0f} s"
        share = 100 * self.records / self.total if self.total else 100.0
        return (
            f"rebuild: {self.records:,}/{self.total:,} records ({share:.0f}%), "
            f"{self.rate:,.0f}/s, ETA {eta}"
        )


@dataclass
class _Run:
    view: RunView
    parked: list[RunEvent] = field(default_factory=list)


@dataclass
class BulkCounts:
    """What a bulk fold did."""

    records: int = 0
    applied: int = 0
    dead_letters: int = 0
    runs_written: int = 0


class PartitionFold:
    """The in-memory fold of one partition number's records (pure: no I/O)."""

    def __init__(
        self,
        codec: EventCodec,
        counts: BulkCounts,
        partitions: int | None = None,
        parked_max: int = DEFAULT_PARKED_MAX,
    ) -> None:
        self._codec = codec
        self._parked_max = parked_max
        self._counts = counts
        self._partitions = partitions
        self._runs: dict[str, _Run] = {}

    def add(self, records: Sequence[Record]) -> None:
        """Fold a chunk of records (each partition's in offset order)."""
        decoded = decode_records(self._codec, records, self._partitions)
        self._counts.records += len(records)
        self._counts.dead_letters += len(decoded.letters)
        for run_id, events in decoded.runs.items():
            state = self._runs.get(run_id)
            if state is None:
                state = self._runs[run_id] = _Run(RunView(run_id=run_id))
            result = fold(state.view, state.parked + events, in_place=True)
            self._counts.applied += len(result.applied)
            state.parked = unique_parked(result.parked)

    def writes(self) -> tuple[list[RunWrite], dict[str, IndexUpdate]]:
        """Each run's one write (from nothing stored) and its index entries."""
        writes: list[RunWrite] = []
        updates: dict[str, IndexUpdate] = {}
        for run_id, state in self._runs.items():
            view = state.view
            if view.applied_seq == 0 and not state.parked:
                continue  # nothing admitted: the live projector writes nothing either
            # every record is in memory here, parking is bounded only where it is stored: what
            # waits behind a gap of the log is kept up to the cap, as the live projector keeps it
            parked, dropped_from = bounded_parked(state.parked, self._parked_max)
            writes.append(
                RunWrite(
                    run_id=run_id,
                    expected=None,
                    view=view,
                    steps=set(view.steps),
                    effects=set(view.effects),
                    parked=parked,
                    parked_changed=bool(parked),
                    dropped_from=dropped_from,
                )
            )
            updates[run_id] = index_update(
                view,
                cold=True,
                status_before=view.status,
                effects=(),
                parked=bool(parked) or dropped_from > 0,
            )
        return writes, updates


async def _write(
    store: ViewStore,
    namespace: str,
    writes: list[RunWrite],
    updates: dict[str, IndexUpdate],
    counts: BulkCounts,
) -> None:
    """Write runs and then their index entries, one slice per pipeline, a few at once."""
    limit = asyncio.Semaphore(WRITES_IN_FLIGHT)

    async def one(part: list[RunWrite]) -> None:
        async with limit:
            outcome = await store.write_runs(namespace, part)
            if outcome.conflicts:
                msg = f"runs {sorted(outcome.conflicts)[:3]} changed in a fresh namespace"
                raise RuntimeError(msg)
            # a run already past retention was deleted by its write: it is indexed nowhere
            entries = [updates[w.run_id] for w in part if w.run_id not in outcome.expired]
            await store.update_indexes(namespace, entries)
            counts.runs_written += len(part) - len(outcome.expired)

    async with asyncio.TaskGroup() as tg:
        for i in range(0, len(writes), WRITE_SLICE):
            tg.create_task(one(writes[i : i + WRITE_SLICE]))


async def bulk_replay(
    store: ViewStore,
    reader: LogReader,
    namespace: str,
    ranges: Mapping[TopicPartition, tuple[int, int]],
    *,
    chunk: int,
    codec: EventCodec,
    on_progress: Callable[[Progress], None] | None = None,
    progress_every_s: float = 1.0,
    partitions: int | None = None,
    parked_max: int = DEFAULT_PARKED_MAX,
) -> BulkCounts:
    """Fold ``ranges`` into ``namespace`` one partition number at a time, each run written once;
    writing partition ``p`` overlaps reading ``p + 1``; progress recorded at the end."""
    counts = BulkCounts()
    total = sum(max(0, end - start) for start, end in ranges.values())
    by_number: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
    for tp, span in ranges.items():
        by_number.setdefault(tp[1], {})[tp] = span
    started = time.monotonic()
    said = started

    def tell(final: bool = False) -> None:
        nonlocal said
        now = time.monotonic()
        if on_progress is not None and (final or now - said >= progress_every_s):
            said = now
            # offsets count transaction markers too: the last line says 100% of the records
            on_progress(Progress(counts.records, counts.records if final else total, now - started))

    async with asyncio.TaskGroup() as tg:
        writing: asyncio.Task[None] | None = None
        for number in sorted(by_number):
            part = PartitionFold(codec, counts, partitions, parked_max)
            async for records in reader.read(by_number[number], chunk):
                part.add(records)
                tell()
                await asyncio.sleep(0)  # let the previous partition's writes go out
            if writing is not None:
                await writing
            writes, updates = part.writes()
            writing = tg.create_task(_write(store, namespace, writes, updates, counts))
    await store.record_progress(namespace, {tp: end for tp, (_, end) in ranges.items()})
    tell(final=True)
    return counts
