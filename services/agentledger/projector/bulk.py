"""Rebuild's fold: whole partitions folded in memory, each run's final view written once.

A rebuild reads every record of a partition before anyone reads the namespace it fills, so
there is no reason to write a run after each chunk as the live projector does. The records of
one partition number (that partition of every run topic: a run's events all land there) are
decoded and folded per run in memory as :class:`~.applier.Applier` folds them (parked events
carried from chunk to chunk), by the plain-data fold of :mod:`agentledger.views.bulk_fold`,
which stores the bytes :func:`~agentledger.views.fold.fold` and the view layout store and falls
back to them for what it is not sure of (DESIGN.md §10); then every run of the partition is
written once, in pipelined slices each encoded just before it is sent, while the next partition
is being read.
A :class:`Replayer` does this for all the ranges of a rebuild: :class:`InProcessReplayer` here,
through any ports, or :class:`~.workers.ProcessReplayer` in parallel processes. The namespace's
progress is recorded once, after the last write of every fold: a crash mid-rebuild leaves a
namespace that was never live and is never used.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from agentledger.events.codec import EventCodec
from agentledger.events.keying import partition_for, run_key
from agentledger.events.models import RunEvent
from agentledger.projector.applier import decode_records, index_update
from agentledger.projector.parking import DEFAULT_PARKED_MAX, bounded_parked, unique_parked
from agentledger.projector.ports import LogReader, LogRecord
from agentledger.views.bulk_fold import PlainRun
from agentledger.views.keys import STATUSES
from agentledger.views.store import FreshRun, IndexUpdate, RunWrite, TopicPartition, ViewStore

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
    plain: PlainRun
    parked: list[RunEvent] = field(default_factory=list)


@dataclass
class BulkCounts:
    """What a bulk fold did."""

    records: int = 0
    applied: int = 0
    dead_letters: int = 0
    runs_written: int = 0
    #: CPU seconds (user + system) of the processes that folded, as they measured them
    cpu_s: float = 0.0

    def add(self, other: BulkCounts) -> None:
        """Add another fold's counts to these."""
        self.records += other.records
        self.applied += other.applied
        self.dead_letters += other.dead_letters
        self.runs_written += other.runs_written
        self.cpu_s += other.cpu_s


class PartitionFold:
    """The in-memory fold of one partition number's records (pure: no I/O)."""

    def __init__(
        self,
        codec: EventCodec,
        counts: BulkCounts,
        partitions: int | None = None,
        parked_max: int = DEFAULT_PARKED_MAX,
        number: int | None = None,
    ) -> None:
        self._codec = codec
        #: the partition number every record is on, when the caller knows it (one per fold)
        self._number = number
        self._parked_max = parked_max
        self._counts = counts
        self._partitions = partitions
        self._runs: dict[str, _Run] = {}
        #: the partition each run's key belongs on (murmur2 once per run, not per record)
        self._homes: dict[str, int] = {}

    def add(self, records: Sequence[LogRecord]) -> None:
        """Fold a chunk of records (each partition's in offset order)."""
        # decode_records would check each record's partition with a murmur2 of its key: the key
        # is the run id on every record of a run, so the check is done here with one per run
        decoded = decode_records(self._codec, records, located=self._number is None)
        self._counts.records += len(records)
        self._counts.dead_letters += len(decoded.letters)
        for run_id, found in decoded.runs.items():
            events = found
            if self._partitions is not None:
                events = self._placed(run_id, found, decoded.where, self._partitions)
                if not events:
                    continue
            state = self._runs.get(run_id)
            if state is None:
                state = self._runs[run_id] = _Run(PlainRun(run_id))
            applied, parked = state.plain.fold(state.parked + events)
            self._counts.applied += applied
            state.parked = unique_parked(parked) if parked else []

    def _placed(
        self, run_id: str, events: list[RunEvent], where: Mapping[str, LogRecord], partitions: int
    ) -> list[RunEvent]:
        """``events`` of ``run_id`` whose records sit on the partition of their key; the rest
        are dead letters (counted), as :func:`~.applier.misplaced` makes them: a reader of the
        run only ever sees its key's partition."""
        home = self._homes.get(run_id)
        if home is None:
            home = self._homes[run_id] = partition_for(run_key(run_id), partitions)
        if self._number is not None:
            return events if home == self._number else self._dead(events)
        kept = [e for e in events if where[e.event_id].partition == home]
        self._counts.dead_letters += len(events) - len(kept)
        return kept

    def _dead(self, events: list[RunEvent]) -> list[RunEvent]:
        self._counts.dead_letters += len(events)
        return []

    def fresh(self) -> list[FreshRun]:
        """Each run's one write (from nothing stored) in its stored form, with its index
        entries: what :meth:`writes` stores, encoded from the plain fold (views/bulk_fold.py)."""
        return [run for part in self.fresh_slices(len(self._runs) or 1) for run in part]

    def fresh_slices(self, size: int) -> Iterator[list[FreshRun]]:
        """:meth:`fresh` in slices of up to ``size`` runs, in the same order, each encoded
        only when asked for: a writer sends one slice while the next is being encoded."""
        out: list[FreshRun] = []
        for run_id, state in self._runs.items():
            plain = state.plain
            if plain.applied_seq == 0 and not state.parked:
                continue  # nothing admitted: the live projector writes nothing either
            parked, dropped_from = bounded_parked(state.parked, self._parked_max)
            fields, steps, effects = plain.stored(len(parked), dropped_from)
            status, updated_at, finished_at, opened = plain.index_facts()
            index = IndexUpdate(
                run_id=run_id,
                status=status,
                updated_at=updated_at,
                drop_statuses=STATUSES,
                open_intents=opened,
                closed_intents=frozenset(effects.keys() - opened.keys()),
                parked=bool(parked) or dropped_from > 0,
            )
            ended = finished_at if finished_at is not None else updated_at
            out.append(FreshRun(run_id, fields, steps, effects, parked, status, ended, index))
            if len(out) >= size:
                yield out
                out = []
        if out:
            yield out

    def writes(self) -> tuple[list[RunWrite], dict[str, IndexUpdate]]:
        """Each run's one write (from nothing stored) as a view, and its index entries."""
        writes: list[RunWrite] = []
        updates: dict[str, IndexUpdate] = {}
        for run_id, state in self._runs.items():
            view = state.plain.model()
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


async def _write(store: ViewStore, namespace: str, fold: PartitionFold, counts: BulkCounts) -> None:
    """Write a folded partition's runs with their index entries, one slice per pipeline, a few
    at once: each slice is encoded just before it is sent (not the whole partition first), so
    Redis stores one slice while this process encodes the next and reads the next partition."""
    limit = asyncio.Semaphore(WRITES_IN_FLIGHT)

    async def one(part: list[FreshRun]) -> None:
        try:
            outcome = await store.write_fresh_stored(namespace, part)
        finally:
            limit.release()
        # a run already past retention was written and indexed nowhere
        counts.runs_written += len(part) - len(outcome.expired)

    async with asyncio.TaskGroup() as tg:
        slices = fold.fresh_slices(WRITE_SLICE)
        while True:
            await limit.acquire()  # encode no further ahead than the writes in flight
            part = next(slices, None)
            if part is None:
                limit.release()
                break
            tg.create_task(one(part))
            await asyncio.sleep(0)  # let the slice go out, and the next partition be read


class Replayer(ABC):
    """Folds offset ranges into a fresh namespace, each run written once; the namespace's
    progress is not recorded (the caller records it once every fold has stood)."""

    #: Below this many records the rebuild folds in its own process instead (a replayer whose
    #: start costs more than it saves on a small log, e.g. child processes' imports).
    min_records: int = 0

    @abstractmethod
    async def replay(
        self,
        namespace: str,
        ranges: Mapping[TopicPartition, tuple[int, int]],
        *,
        partitions: int | None,
        parked_max: int,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> BulkCounts:
        """Fold ``ranges`` into ``namespace``; ``on_progress`` about once a second and at last."""


class Teller:
    """Turns record counts into :class:`Progress` for the operator, at most once per interval."""

    def __init__(
        self,
        total: int,
        on_progress: Callable[[Progress], None] | None,
        every_s: float = 1.0,
    ) -> None:
        self._total = total
        self._on_progress = on_progress
        self._every_s = every_s
        self._started = self._said = time.monotonic()

    def tell(self, records: int, *, final: bool = False) -> None:
        """Report ``records`` done if an interval has passed (or ``final``)."""
        now = time.monotonic()
        if self._on_progress is not None and (final or now - self._said >= self._every_s):
            self._said = now
            # offsets count transaction markers too: the last line says 100% of the records
            total = records if final else self._total
            self._on_progress(Progress(records, total, now - self._started))


async def fold_ranges(
    store: ViewStore,
    reader: LogReader,
    namespace: str,
    ranges: Mapping[TopicPartition, tuple[int, int]],
    *,
    chunk: int,
    codec: EventCodec,
    counts: BulkCounts,
    on_records: Callable[[], None] | None = None,
    partitions: int | None = None,
    parked_max: int = DEFAULT_PARKED_MAX,
) -> None:
    """Fold ``ranges`` into ``namespace`` one partition number at a time, each run written once;
    writing partition ``p`` overlaps reading ``p + 1``. ``on_records`` is called after each
    chunk (``counts`` says how far). No progress is recorded."""
    by_number: dict[int, dict[TopicPartition, tuple[int, int]]] = {}
    for tp, span in ranges.items():
        by_number.setdefault(tp[1], {})[tp] = span
    async with asyncio.TaskGroup() as tg:
        writing: asyncio.Task[None] | None = None
        for number in sorted(by_number):
            part = PartitionFold(codec, counts, partitions, parked_max, number=number)
            async for records in reader.read(by_number[number], chunk):
                part.add(records)
                if on_records is not None:
                    on_records()
                await asyncio.sleep(0)  # let the previous partition's writes go out
            if writing is not None:
                await writing
            writing = tg.create_task(_write(store, namespace, part, counts))


class InProcessReplayer(Replayer):
    """Folds in this process, through the given ports (any store and log: tests, one core)."""

    def __init__(
        self, store: ViewStore, reader: LogReader, codec: EventCodec, *, chunk: int = 5000
    ) -> None:
        self._store = store
        self._reader = reader
        self._codec = codec
        self._chunk = chunk

    async def replay(
        self,
        namespace: str,
        ranges: Mapping[TopicPartition, tuple[int, int]],
        *,
        partitions: int | None,
        parked_max: int,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> BulkCounts:
        """See :meth:`Replayer.replay`."""
        counts = BulkCounts()
        teller = Teller(sum(max(0, end - start) for start, end in ranges.values()), on_progress)
        cpu = time.process_time()
        await fold_ranges(
            self._store,
            self._reader,
            namespace,
            ranges,
            chunk=self._chunk,
            codec=self._codec,
            counts=counts,
            on_records=lambda: teller.tell(counts.records),
            partitions=partitions,
            parked_max=parked_max,
        )
        counts.cpu_s = time.process_time() - cpu
        teller.tell(counts.records, final=True)
        return counts


async def bulk_replay(
    store: ViewStore,
    reader: LogReader,
    namespace: str,
    ranges: Mapping[TopicPartition, tuple[int, int]],
    *,
    chunk: int,
    codec: EventCodec,
    on_progress: Callable[[Progress], None] | None = None,
    partitions: int | None = None,
    parked_max: int = DEFAULT_PARKED_MAX,
) -> BulkCounts:
    """Fold ``ranges`` into ``namespace`` in this process (see :func:`fold_ranges`), then record
    the ends of ``ranges`` as its progress."""
    replayer = InProcessReplayer(store, reader, codec, chunk=chunk)
    counts = await replayer.replay(
        namespace, ranges, partitions=partitions, parked_max=parked_max, on_progress=on_progress
    )
    await store.record_progress(namespace, {tp: end for tp, (_, end) in ranges.items()})
    return counts
