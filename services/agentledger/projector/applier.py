"""Apply a batch of run-topic records to a namespace: decode, fold each run, write atomically.

Per run: the stored view and parked events are loaded (or taken from a cache that the write
token keeps honest; a run whose first event is in the batch starts empty, unread, and its write
token finds it if it was stored after all) and the pure fold admits the batch's events.
Findings (stale fences, dead letters) are published first; then the store commits the runs,
their index entries and the batch's progress, each slot group in one atomic step guarded by the
tokens the folds started from (DESIGN.md §14). A conflict (another projector wrote a run
meanwhile) leaves its group unwritten: those runs are refolded from what is stored and committed
again. Everything is idempotent, so a crash at any point followed by a redo of the batch
converges to the same state.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import EventPublisher
from agentledger.errors import DecodeError, ViewWriteConflictError
from agentledger.events.codec import EventCodec
from agentledger.events.models import Alert, DeadLettered, RecordSkipped, RunEvent
from agentledger.projector.findings import (
    closed_run_alert,
    dead_letter,
    divergent_seq_alert,
    fence_conflict_alert,
    stale_fence_alert,
)
from agentledger.projector.holding import HELD_MAX, HeldEvents
from agentledger.projector.killpoints import ProjectorKillSwitch
from agentledger.projector.metrics import Metrics
from agentledger.projector.parking import (
    DEFAULT_PARKED_MAX,
    bounded_parked,
    needs_reread,
)
from agentledger.projector.ports import LogRecord
from agentledger.views.fold import FoldResult, fold, malformed
from agentledger.views.keys import STATUSES
from agentledger.views.layout import token_for
from agentledger.views.model import OPEN_EFFECT_STATES, RunView
from agentledger.views.store import (
    IndexUpdate,
    RunWrite,
    StoredRun,
    TopicPartition,
    ViewStore,
    WriteOutcome,
)

log = structlog.get_logger(__name__)

MAX_CONFLICT_ROUNDS = 5
#: A batch of more records than this is committed in slices of whole partitions of about this
#: many records, each sent while the next is folded (DESIGN.md §16). Smaller slices overlap more
#: of Redis's work with the fold; each costs one more round trip and script call.
SLICE_RECORDS = 500
_WHOLE = math.inf  # one slice, whatever its size
_LETTERED_KEPT = 100_000


class RecentIds:
    """A bounded set of ids, oldest forgotten first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._ids: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, item: object) -> bool:
        return item in self._ids

    def put(self, item: str) -> None:
        """Remember ``item`` (forgetting the oldest beyond capacity)."""
        self._ids[item] = None
        while len(self._ids) > self._capacity:
            self._ids.popitem(last=False)


class RunCache:
    """The most recently written runs of this projector, least recently used evicted first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._runs: OrderedDict[str, StoredRun] = OrderedDict()

    def get(self, run_id: str) -> StoredRun | None:
        """The cached run, marked as recently used."""
        stored = self._runs.get(run_id)
        if stored is not None:
            self._runs.move_to_end(run_id)
        return stored

    def put(self, run_id: str, stored: StoredRun) -> None:
        """Remember ``stored`` (evicting the oldest entries beyond capacity)."""
        self._runs[run_id] = stored
        self._runs.move_to_end(run_id)
        while len(self._runs) > self._capacity:
            self._runs.popitem(last=False)

    def drop(self, run_id: str) -> None:
        """Forget one run."""
        self._runs.pop(run_id, None)

    def clear(self) -> None:
        """Forget everything."""
        self._runs.clear()


@dataclass
class _Fold:
    """One run's fold within a round: where it started and what came out."""

    state: StoredRun
    cold: bool
    status_before: str
    result: FoldResult
    parked: list[RunEvent]
    dropped_from: int
    write: RunWrite | None


@dataclass
class Slice:
    """Whole partitions of a batch: their runs' events, their progress and floors."""

    runs: dict[str, list[RunEvent]] = field(default_factory=dict)
    partitions: set[int] = field(default_factory=set)
    progress: dict[TopicPartition, int] = field(default_factory=dict)
    floors: dict[TopicPartition, int] = field(default_factory=dict)


@dataclass
class Decoded:
    """A batch's records decoded: run events by run, dead letters, and where each event was."""

    runs: dict[str, list[RunEvent]] = field(default_factory=dict)
    letters: list[DeadLettered] = field(default_factory=list)
    where: dict[str, LogRecord] = field(default_factory=dict)


def misplaced(
    rec: LogRecord,
    event: RunEvent,
    partitions: int | None,
    homes: dict[bytes, int] | None = None,
) -> str | None:
    """Why ``rec`` is not where a writer puts ``event`` (None when it is): run events are keyed
    by their run id and sit on the partition of that key. Readers of one run (the SDK folding
    it from Kafka) only ever see its key's partition, so the projector must not use the rest.
    ``homes`` memoizes each key's partition (murmur2 in Python costs about what decoding the
    record does; a run's events share one key)."""
    if rec.key != run_key(event.run_id):
        return (
            f"{type(event).__name__} of run {event.run_id!r} has key {rec.key!r}; run events are "
            "keyed by their run id"
        )
    if partitions is not None:
        home = homes.get(rec.key) if homes is not None else None
        if home is None:
            home = partition_for(rec.key, partitions)
            if homes is not None:
                homes[rec.key] = home
        if rec.partition != home:
            return (
                f"{type(event).__name__} of run {event.run_id!r} is on partition "
                f"{rec.partition}; its key belongs on partition {home} of {partitions}"
            )
    return None


def decode_records(
    codec: EventCodec,
    records: Iterable[LogRecord],
    partitions: int | None = None,
    *,
    located: bool = True,
) -> Decoded:
    """Decode every record; what cannot be used (undecodable, not a run event, not where its
    run's events go with ``partitions`` per run topic, or one the fold cannot read) becomes a
    dead letter, never an error. ``located=False`` leaves ``where`` empty (a rebuild's partition
    fold knows every record's partition and never asks)."""
    out = Decoded()
    runs, letters, where = out.runs, out.letters, out.where
    homes: dict[bytes, int] = {}
    decode = codec.decode
    for rec in records:
        try:
            event = decode(rec.value, topic=rec.topic, partition=rec.partition, offset=rec.offset)
        except DecodeError as e:
            letters.append(dead_letter(rec, str(e)))
            continue
        if not isinstance(event, RunEvent):
            if isinstance(event, RecordSkipped):
                continue  # an operator's note for readers of the run's log, nothing to fold
            reason = f"{type(event).__name__} is not a run event and does not belong on {rec.topic}"
            letters.append(dead_letter(rec, reason))
            continue
        run_id = event.run_id
        # the key check of misplaced() inline: a rebuild decodes every record of the log here
        if partitions is None and rec.key == run_key(run_id):
            wrong = malformed(event)
        else:
            wrong = misplaced(rec, event, partitions, homes) or malformed(event)
        if wrong is not None:
            letters.append(dead_letter(rec, wrong))
            continue
        found = runs.get(run_id)
        if found is None:
            runs[run_id] = [event]
        else:
            found.append(event)
        if located:
            where[event.event_id] = rec
    return out


def partition_slices(
    batch: Decoded,
    progress: Mapping[TopicPartition, int],
    floors: Mapping[TopicPartition, int],
    size: float,
) -> list[Slice]:
    """``batch`` cut into slices of whole partitions (in partition order) of at least ``size``
    events each but the last; each partition's progress and floor go with its runs, those of
    partitions with no run event in the batch (dead letters, skipped records) with the last."""
    by_partition: dict[int, dict[str, list[RunEvent]]] = {}
    for run_id, events in batch.runs.items():
        home = batch.where[events[0].event_id].partition
        by_partition.setdefault(home, {})[run_id] = events
    slices: list[Slice] = []
    current, count = Slice(), 0
    for partition in sorted(by_partition):
        runs = by_partition[partition]
        current.runs.update(runs)
        current.partitions.add(partition)
        count += sum(len(events) for events in runs.values())
        if count >= size:
            slices.append(current)
            current, count = Slice(), 0
    if current.runs or not slices:
        slices.append(current)
    owner = {p: part for part in slices for p in part.partitions}
    for tp, offset in progress.items():
        owner.get(tp[1], slices[-1]).progress[tp] = offset
    for tp, floor in floors.items():
        owner.get(tp[1], slices[-1]).floors[tp] = floor
    return slices


def index_update(
    view: RunView,
    *,
    cold: bool,
    status_before: str,
    effects: Iterable[str],
    parked: bool,
) -> IndexUpdate:
    """Index entries after a write; a cold-loaded run gets all of them (repairs a crashed redo)."""
    if cold:
        drops: tuple[str, ...] = STATUSES
        keys: Iterable[str] = view.effects
    else:
        drops = (status_before,) if status_before != view.status else ()
        keys = effects
    opened: dict[str, int] = {}
    closed: set[str] = set()
    for key in keys:
        effect = view.effects.get(key)
        if effect is not None and effect.state in OPEN_EFFECT_STATES:
            opened[key] = effect.intended_at
        else:
            closed.add(key)
    return IndexUpdate(
        run_id=view.run_id,
        status=view.status,
        updated_at=view.updated_at,
        drop_statuses=drops,
        open_intents=opened,
        closed_intents=frozenset(closed),
        parked=parked,
    )


class Applier:
    """Folds batches into one store; keeps a cache of recently written runs."""

    def __init__(
        self,
        store: ViewStore,
        publisher: EventPublisher,
        codec: EventCodec,
        *,
        metrics: Metrics,
        cache_size: int = 20_000,
        partitions: int | None = None,
        parked_max: int = DEFAULT_PARKED_MAX,
        slice_records: int = SLICE_RECORDS,
        hold_s: float = 0.0,
        held_max: int = HELD_MAX,
        kill: ProjectorKillSwitch | None = None,
    ) -> None:
        self._store = store
        self._kill = kill or ProjectorKillSwitch()
        # events a run cannot apply yet, held in memory instead of parked in the store while
        # their gap is likely to fill from the next fetch (DESIGN.md §16)
        self._held = HeldEvents(hold_s, capacity=held_max)
        self._slice = slice_records
        self._parked_max = parked_max
        # runs whose next event may be one dropped over the parked cap: the runner re-reads
        # their records from the log (outside any read of it) and applies them as ``complete``
        self._rereads: set[str] = set()
        self._partitions = partitions
        self._publisher = publisher
        self._codec = codec
        self._metrics = metrics
        self._cache = RunCache(cache_size)
        # dead letters and alerts already published: a batch retried after a later failure (or
        # a tick's catch-up redone, or a group refolded after a conflict) must not publish them
        # again
        self._lettered = RecentIds(_LETTERED_KEPT)
        self._alerted = RecentIds(_LETTERED_KEPT)

    def reset(self) -> None:
        """Forget cached runs, held events and pending re-reads (another namespace, or after
        an error): progress never passed a held event, so a redo reads it from the log."""
        self._cache.clear()
        self._rereads.clear()
        self._held.clear()

    def take_rereads(self) -> set[str]:
        """The runs to re-read from the log since the last call (see :mod:`.parking`)."""
        found, self._rereads = self._rereads, set()
        return found

    async def apply(
        self,
        namespace: str,
        records: Sequence[LogRecord],
        progress: Mapping[TopicPartition, int] | None = None,
        floors: Mapping[TopicPartition, int] | None = None,
        *,
        complete: frozenset[str] = frozenset(),
        hold: bool = False,
    ) -> dict[TopicPartition, int]:
        """Apply ``records`` to ``namespace`` and raise ``progress`` with the views (one atomic
        step per slot group and slice), provided the stored progress reached ``floors`` (else
        ViewsRegressedError); return the progress written. On any error drop the cache and
        the held events, and re-raise.

        With ``hold`` (and a hold time), events a run cannot apply yet are held in memory
        instead of parked in the store, and each partition's progress stops at its lowest held
        record (DESIGN.md §16); held events of the batch's runs, and every held event past the
        hold time, are folded again first.

        ``complete`` names runs whose every record up to now is in ``records`` (a re-read of
        their log): the events they dropped over the parked cap are among them, so their drop
        mark is recomputed from this fold alone. Dead letters of such a re-read were published
        when the records were first applied, and are not published again.
        """
        try:
            batch = decode_records(self._codec, records, self._partitions)
            if complete:
                batch.letters = []
            return await self._apply(
                namespace, batch, progress or {}, floors or {}, complete, hold=hold
            )
        except BaseException:
            self._cache.clear()
            self._held.clear()
            raise

    async def _apply(
        self,
        namespace: str,
        batch: Decoded,
        progress: Mapping[TopicPartition, int],
        floors: Mapping[TopicPartition, int],
        complete: frozenset[str],
        *,
        hold: bool,
    ) -> dict[TopicPartition, int]:
        """Fold and commit ``batch`` in slices of whole partitions, each committed as its own
        atomic step (its runs' views and index entries with its partitions' progress), sent
        as soon as it is folded: Redis runs one slice's scripts while this process folds and
        encodes the next (DESIGN.md §16). A run's records all sit on its home partition, so
        slices share no run: no slice's fold depends on another's commit. A re-read of runs
        (``complete``) is one slice, as is a batch of at most ``slice_records`` records."""
        now = time.monotonic()
        self._held.take(batch, now, self._lagging())
        await self._publish_letters(batch)
        # without the partition count a run's home is not checked: one slice, one commit
        size = _WHOLE if complete or self._partitions is None else self._slice
        slices = partition_slices(batch, progress, floors, size)
        # a run the cache lacks whose first event is here is folded on an empty view, unread:
        # its commit expects no stored run, so one stored after all is a conflict, refolded
        states, unread = await self._states(namespace, batch.runs, unread_starts=not complete)
        flights: list[tuple[asyncio.Future[WriteOutcome], dict[str, _Fold], Slice]] = []
        written: dict[TopicPartition, int] = {}
        try:
            for part in slices:
                folds = self._fold_runs(
                    part.runs, states, complete, where=batch.where, hold=hold, now=now
                )
                unsure = [r for r in folds if r in unread and _unsure(folds[r])]
                if unsure:
                    folds.update(
                        await self._fold_read(
                            namespace, unsure, part, batch=batch, states=states, hold=hold, now=now
                        )
                    )
                await self._publish_alerts(folds, batch)
                writes = [f.write for f in folds.values() if f.write is not None]
                updates = [u for u in (_index_of(f) for f in folds.values()) if u is not None]
                # a partition's held events were all decided by this slice's fold
                part.progress = self._held.below(part.progress)
                written.update(part.progress)
                send = self._store.plan_commit(
                    namespace, writes, updates, part.progress, part.floors
                )
                flights.append((asyncio.ensure_future(self._committed(send)), folds, part))
                if len(slices) > 1:
                    await asyncio.sleep(0)  # the commit goes out before the next slice is folded
        finally:
            # every commit sent is waited for (never left running), the first failure raised
            done = await asyncio.gather(*(f for f, _, _ in flights), return_exceptions=True)
        for failed in done:
            if isinstance(failed, BaseException):
                raise failed
        outcomes = [o for o in done if isinstance(o, WriteOutcome)]
        for (_, folds, part), outcome in zip(flights, outcomes, strict=True):
            self._settle_outcome(folds, outcome)
            if outcome.unwritten:
                await self._refold(
                    namespace, batch, part, outcome.unwritten, complete=complete, hold=hold, now=now
                )
        return written

    async def _committed(self, send: Callable[[], Awaitable[WriteOutcome]]) -> WriteOutcome:
        """Send one slice's commit; its reply is the ``slice_committed`` kill point."""
        outcome = await send()
        self._kill.reached("slice_committed")
        return outcome

    async def _refold(
        self,
        namespace: str,
        batch: Decoded,
        part: Slice,
        unwritten: set[str],
        *,
        complete: frozenset[str],
        hold: bool,
        now: float,
    ) -> None:
        """A slice's commit found moved tokens and wrote nothing: its runs are refolded from
        what is stored and committed again with the same progress, until nothing moves."""
        pending = {r: part.runs[r] for r in unwritten if r in part.runs}
        for _ in range(MAX_CONFLICT_ROUNDS):
            for run_id in pending:
                self._held.drop(run_id)  # its events are in ``pending``: decided again
            states, _ = await self._states(namespace, pending)
            folds = self._fold_runs(
                pending, states, complete, where=batch.where, hold=hold, now=now
            )
            await self._publish_alerts(folds, batch)
            writes = [f.write for f in folds.values() if f.write is not None]
            updates = [u for u in (_index_of(f) for f in folds.values()) if u is not None]
            part.progress = self._held.below(part.progress)
            outcome = await self._store.commit(
                namespace, writes, updates, part.progress, part.floors
            )
            self._kill.reached("slice_committed")
            self._settle_outcome(folds, outcome)
            pending = {r: pending[r] for r in outcome.unwritten if r in pending}
            if not outcome.unwritten:
                return
        run_id = min(pending) if pending else "?"
        msg = f"view kept changing under this projector for {MAX_CONFLICT_ROUNDS} rounds"
        raise ViewWriteConflictError(msg, run_id=run_id)

    # --- events held in memory (DESIGN.md §16) -------------------------------------------

    @property
    def held_partitions(self) -> set[int]:
        """Partition numbers with an event held in memory (their progress stops before it)."""
        return self._held.partitions

    def held_due(self) -> bool:
        """True when some held event's hold is over (the next apply parks it)."""
        return self._held.due(time.monotonic(), self._lagging())

    def below_held(self, progress: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """``progress`` with each partition stopped at its lowest held record, if any."""
        return self._held.below(progress)

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Drop the held events of partitions no longer ours (see HeldEvents.forget)."""
        self._held.forget(tps)

    def _lagging(self) -> set[int]:
        """Partition numbers with a run topic not delivered up to its end (at the last tick):
        a gap of theirs may fill from the next fetch."""
        return {p for (_, p), n in self._metrics.lag.items() if n > 0}

    def _settle_outcome(self, folds: dict[str, _Fold], outcome: WriteOutcome) -> None:
        """Cache and count what a commit wrote; forget the cached views it left unwritten."""
        for run_id in outcome.unwritten:
            # a fold works in place on the cached view: what was not written is unknown
            self._cache.drop(run_id)
        self._metrics.write_conflicts += len(outcome.conflicts)
        for run_id, done in folds.items():
            if run_id not in outcome.unwritten:
                self._settle(run_id, done, expired=run_id in outcome.expired)

    async def _publish_alerts(self, folds: dict[str, _Fold], batch: Decoded) -> None:
        """Publish the folds' findings not published before."""
        alerts = [a for done in folds.values() for a in self._alerts(done, batch)]
        fresh = [a for a in alerts if a.alert_id not in self._alerted]
        if fresh:
            await self._publisher.publish(fresh)
            self._metrics.count_alerts(a.code for a in fresh)
            for a in fresh:
                self._alerted.put(a.alert_id)

    async def _publish_letters(self, batch: Decoded) -> None:
        """Publish the batch's dead letters not published before."""
        letters = [x for x in batch.letters if x.event_id not in self._lettered]
        if letters:
            await self._publisher.publish(letters)
            self._metrics.dead_lettered += len(letters)
            for letter in letters:
                self._lettered.put(letter.event_id)
                log.warning(
                    "record_dead_lettered",
                    topic=letter.source_topic,
                    partition=letter.source_partition,
                    offset=letter.source_offset,
                    reason=letter.reason,
                )

    async def _states(
        self,
        namespace: str,
        runs: Mapping[str, Sequence[RunEvent]] | Iterable[str],
        *,
        unread_starts: bool = False,
    ) -> tuple[dict[str, tuple[StoredRun, bool]], set[str]]:
        """Each run's state to fold on and whether it was loaded cold (not cached): the cache,
        else what the store holds (all missing runs in one read), else an empty run.

        With ``unread_starts`` (``runs`` a mapping to their events), a missing run whose first
        event (seq 1) is among its events is not read: it starts empty, like a run the store
        lacks, and is returned in the second set (DESIGN.md §16, session 15). Its commit
        expects no stored run, so one stored after all is a conflict: left unwritten and
        refolded from the store."""
        states: dict[str, tuple[StoredRun, bool]] = {}
        missing = []
        unread: set[str] = set()
        events_of = runs if unread_starts and isinstance(runs, Mapping) else None
        for run_id in runs:
            cached = self._cache.get(run_id)
            if cached is not None:
                states[run_id] = (cached, False)
            elif events_of is not None and _starts(events_of[run_id]):
                unread.add(run_id)
                states[run_id] = (StoredRun(RunView(run_id=run_id), [], None), True)
            else:
                missing.append(run_id)
        loaded = await self._store.load_runs(namespace, missing) if missing else {}
        for run_id in missing:
            state = loaded.get(run_id)
            states[run_id] = (state or StoredRun(RunView(run_id=run_id), [], None), True)
        return states, unread

    async def _fold_read(
        self,
        namespace: str,
        run_ids: list[str],
        part: Slice,
        *,
        batch: Decoded,
        states: dict[str, tuple[StoredRun, bool]],
        hold: bool,
        now: float,
    ) -> dict[str, _Fold]:
        """Runs folded unread whose fold found something (a finding, or nothing to write),
        read from the store and folded again: what is published, and whether a commit is
        made, is decided on what is stored, as for any run new to the cache."""
        for run_id in run_ids:
            self._held.drop(run_id)  # its events are in the slice: decided again
        read, _ = await self._states(namespace, run_ids)
        states.update(read)
        pending = {r: part.runs[r] for r in run_ids}
        return self._fold_runs(pending, read, frozenset(), where=batch.where, hold=hold, now=now)

    def _fold_runs(
        self,
        pending: dict[str, list[RunEvent]],
        states: Mapping[str, tuple[StoredRun, bool]],
        complete: frozenset[str],
        *,
        where: Mapping[str, LogRecord],
        hold: bool,
        now: float,
    ) -> dict[str, _Fold]:
        folds: dict[str, _Fold] = {}
        holding = hold and self._held.hold_s > 0
        room = self._held.room()
        lagging = self._lagging() if holding else set()
        for run_id, events in pending.items():
            state, cold = states[run_id]
            status_before = state.view.status
            result = fold(state.view, state.parked + events, in_place=True)
            since = 0 if run_id in complete else state.dropped_from
            parked, dropped_from = bounded_parked(result.parked, self._parked_max, since)
            before = {e.event_id for e in state.parked}
            home = where[events[0].event_id].partition
            fresh = [e for e in parked if e.event_id not in before]
            if (
                holding
                and fresh
                and len(fresh) <= room
                and dropped_from == state.dropped_from
                and run_id not in complete
                and not self._held.expired(home, run_id, now, lagging)
            ):
                self._held.hold(run_id, home, [(e, where[e.event_id]) for e in fresh], now)
                self._metrics.held += len(fresh)
                room -= len(fresh)
                parked = [e for e in parked if e.event_id in before]
            else:
                self._held.release(run_id, home)
            parked_changed = {e.event_id for e in parked} != before
            write = None
            if result.applied or parked_changed or dropped_from != state.dropped_from:
                write = RunWrite(
                    run_id=run_id,
                    expected=state.token,
                    view=result.view,
                    steps=set(result.touched_steps),
                    effects=set(result.touched_effects),
                    parked=parked,
                    parked_changed=parked_changed,
                    dropped_from=dropped_from,
                )
            folds[run_id] = _Fold(state, cold, status_before, result, parked, dropped_from, write)
        return folds

    def _settle(self, run_id: str, done: _Fold, *, expired: bool) -> None:
        """Update cache and metrics for a run whose write stood."""
        result = done.result
        m = self._metrics
        m.count_applied(len(result.applied))
        m.duplicates += len(result.duplicates)
        before = {e.event_id for e in done.state.parked}
        m.parked += len([e for e in done.parked if e.event_id not in before])
        m.stale += len(result.stale)
        m.conflicts += len(result.conflicts)
        if expired:
            self._cache.drop(run_id)
            return
        if needs_reread(result.view, done.dropped_from):
            self._rereads.add(run_id)
        if done.write is None and (not done.cold or done.state.token is None):
            return
        token = token_for(result.view.applied_seq, len(done.parked), done.dropped_from)
        stored = StoredRun(
            result.view,
            done.parked,
            token if done.write else done.state.token,
            done.dropped_from,
        )
        if stored.token is not None:
            self._cache.put(run_id, stored)

    def _alerts(self, done: _Fold, batch: Decoded) -> list[Alert]:
        view = done.result.view
        found: list[Alert] = []
        for event in done.result.stale:
            log.warning(
                "stale_fence_rejected",
                run_id=event.run_id,
                worker_id=event.worker_id,
                seq=event.seq,
                stale_fence=event.fence,
                current_fence=view.fence,
            )
            found.append(stale_fence_alert(event, view, batch.where.get(event.event_id)))
        for event in done.result.conflicts:
            log.warning(
                "fence_conflict", run_id=event.run_id, worker_id=event.worker_id, seq=event.seq
            )
            found.append(fence_conflict_alert(event, view, batch.where.get(event.event_id)))
        for event in done.result.divergent:
            log.warning(
                "seq_divergent", run_id=event.run_id, worker_id=event.worker_id, seq=event.seq
            )
            found.append(divergent_seq_alert(event, view, batch.where.get(event.event_id)))
        for event in done.result.closed:
            log.warning(
                "event_after_finish", run_id=event.run_id, worker_id=event.worker_id, seq=event.seq
            )
            found.append(closed_run_alert(event, view, batch.where.get(event.event_id)))
        return found


def _starts(events: Sequence[RunEvent]) -> bool:
    """True when the run's first event (seq 1) is among ``events``."""
    return any(e.seq == 1 for e in events)


def _unsure(done: _Fold) -> bool:
    """True when a fold on an empty view, not read from the store, cannot stand for the fold
    on what may be stored: it has findings (published before the commit that would show the
    run stored) or writes nothing (no commit to compare the empty token)."""
    result = done.result
    return (
        done.write is None
        or bool(result.stale)
        or bool(result.conflicts)
        or bool(result.divergent)
        or bool(result.closed)
    )


def _index_of(done: _Fold) -> IndexUpdate | None:
    """The index entries a fold's commit carries (a cold-loaded run gets all of them)."""
    if done.write is None and (not done.cold or done.state.token is None):
        return None
    return index_update(
        done.result.view,
        cold=done.cold,
        status_before=done.status_before,
        effects=done.result.touched_effects,
        parked=bool(done.parked) or done.dropped_from > 0,
    )
