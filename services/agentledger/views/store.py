"""The view-store port: the read side (SDK, reconciler, CLI) and the write side (projector).

Views live in namespaces; the live one is named by a pointer that ``views rebuild`` flips in one
write. Each run is written atomically together with what was applied to it (its ``applied_seq``
and parked events), guarded by the token the writer's fold started from: a concurrent writer
gets a conflict, never a lost update. Indexes and progress live in other slots and are updated
idempotently right after.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from agentledger.events.models import RunEvent
from agentledger.events.positions import Position
from agentledger.views.layout import Token, decode_run, dropped_of
from agentledger.views.model import RunView

#: A topic-partition as the store keys progress by.
TopicPartition = tuple[str, int]
#: One key of a namespace as compared by ``views verify``: (type, normalized content, has TTL).
SnapshotValue = tuple[str, object, bool]


@dataclass(frozen=True)
class OpenIntent:
    """An effect intent with no known outcome, as indexed for the reconciler."""

    run_id: str
    idempotency_key: str
    intended_at: int


@dataclass
class StoredRun:
    """A run as stored: its view, the events parked ahead of a gap, its write token, and the
    lowest seq of parked events dropped over the cap (0: none; see ``PROJECTOR_PARKED_MAX``)."""

    view: RunView
    parked: list[RunEvent]
    token: Token
    dropped_from: int = 0


@dataclass
class RunWrite:
    """What a fold changed in one run, to be stored atomically if the run still has ``expected``."""

    run_id: str
    expected: Token
    view: RunView
    steps: set[int] = field(default_factory=set)
    effects: set[str] = field(default_factory=set)
    parked: list[RunEvent] = field(default_factory=list)
    parked_changed: bool = False
    dropped_from: int = 0


@dataclass(frozen=True)
class FreshRun:
    """One run of a rebuild already in its stored form (views/bulk_fold.py, DESIGN.md §10):
    the fields of its run, steps and effects hashes, its parked events, when it ended
    (``finished_at``, else ``updated_at``: retention counts from it) and its index entries."""

    run_id: str
    fields: dict[str, bytes]
    steps: dict[str, bytes]
    effects: dict[str, bytes]
    parked: list[RunEvent]
    status: str
    ended_at: int
    index: IndexUpdate


class WriteOutcome:
    """Result of :meth:`ViewStore.write_runs` / :meth:`ViewStore.commit`: runs that conflicted,
    runs that expired, and (commit) every run left unwritten with its slot group."""

    def __init__(self) -> None:
        self.conflicts: set[str] = set()
        self.expired: set[str] = set()
        self.unwritten: set[str] = set()


@dataclass(frozen=True)
class IndexUpdate:
    """Index entries of one run; every operation is idempotent, so a retry repairs a crash.

    ``status`` None removes the run from every index (it expired). ``drop_statuses`` are the
    statuses the run may still be listed under.
    """

    run_id: str
    status: str | None
    updated_at: int = 0
    drop_statuses: tuple[str, ...] = ()
    open_intents: Mapping[str, int] = field(default_factory=dict)
    closed_intents: frozenset[str] = frozenset()
    parked: bool = False


@dataclass(frozen=True)
class ViewAt:
    """A run's stored view and the projector's progress on the run's partitions, read so that
    the view (with its parked events, waiting behind a gap) holds every event of the run before
    those offsets: progress is raised only after the views it covers are written."""

    view: RunView | None
    progress: dict[TopicPartition, int]
    parked: list[RunEvent]
    dropped_from: int = 0

    def covers(self, positions: Sequence[Position]) -> bool:
        """True when the projector had applied everything before each of ``positions``."""
        return all(self.progress.get((p.topic, p.partition), 0) >= p.offset for p in positions)


class ViewReader(ABC):
    """Read resume views and the projector's progress."""

    @abstractmethod
    async def load(self, run_id: str) -> RunView | None:
        """The run's view, or None if the projector has never seen the run."""

    async def load_many(self, run_ids: Sequence[str]) -> dict[str, RunView]:
        """:meth:`load` for each run (runs never seen are absent); stores override it with one
        round trip."""
        views = await asyncio.gather(*(self.load(r) for r in run_ids))
        return {r: v for r, v in zip(run_ids, views, strict=True) if v is not None}

    @abstractmethod
    async def progress(self, positions: list[Position]) -> bool:
        """True when the projector has applied everything before each of ``positions``."""

    @abstractmethod
    async def load_at(self, run_id: str, partitions: Sequence[TopicPartition]) -> ViewAt | None:
        """The run's view with the progress it is complete up to (None: no live namespace)."""

    #: Whether :meth:`load_at_every` is offered: a resume then reads the view beside the run's
    #: end offsets instead of after them (it does not need the run's partitions to ask).
    reads_every_partition: bool = False

    async def load_at_every(self, run_id: str) -> ViewAt | None:
        """:meth:`load_at` with the progress of every partition the projector recorded (absent:
        nothing applied there). Only where :attr:`reads_every_partition` says so."""
        msg = f"{type(self).__name__} reads progress per partition only"
        raise NotImplementedError(msg)

    async def load_many_at(
        self,
        partitions: Mapping[str, Sequence[TopicPartition]],
        *,
        only: Collection[str] | None = None,
    ) -> dict[str, ViewAt] | None:
        """:meth:`load_at` of each run with its partitions (every run present); None if a run
        found no live namespace. Stores override it with one progress read and one round trip
        for the runs. ``only``: the run fields the caller reads (stores may decode just those
        and no steps, see :meth:`ViewStore.load_runs`; a brief view is for reading, never to
        fold onto or write back)."""
        runs = list(partitions)
        found = await asyncio.gather(*(self.load_at(r, partitions[r]) for r in runs))
        if any(at is None for at in found):
            return None
        return {r: at for r, at in zip(runs, found, strict=True) if at is not None}

    @abstractmethod
    async def runs_by_status(self, status: str, limit: int = 1000) -> list[str]:
        """Run ids currently in ``status`` (running, paused, succeeded …)."""

    @abstractmethod
    async def open_intents(
        self, older_than: int | None = None, limit: int = 1000
    ) -> list[OpenIntent]:
        """Open intents, oldest first; ``older_than`` is an epoch-ms cut-off."""


class ViewStore(ViewReader):
    """The projector's side: namespaces, atomic per-run writes, indexes and progress."""

    @abstractmethod
    async def live_namespace(self, *, create: bool = False) -> str | None:
        """The namespace the pointer names; with ``create``, make and point to one if none."""

    @abstractmethod
    async def create_namespace(self) -> str:
        """A fresh, empty namespace (registered, not live, with its birth mark)."""

    @abstractmethod
    async def mark_namespace(self, namespace: str) -> None:
        """Give ``namespace`` its birth mark if it has none (namespaces of older versions)."""

    @abstractmethod
    async def is_marked(self, namespace: str) -> bool:
        """Whether ``namespace`` still has its birth mark (gone: its progress vanished)."""

    @abstractmethod
    async def replace_live(self, old: str, fresh: str) -> str:
        """Point at ``fresh`` if the pointer still names ``old`` or nothing; return the live one."""

    @abstractmethod
    async def swap(self, namespace: str) -> str | None:
        """Point readers and projectors at ``namespace`` in one write; return the previous one."""

    @abstractmethod
    async def drop_namespace(self, namespace: str) -> int:
        """Delete every key of ``namespace`` (never the live one); return how many."""

    @abstractmethod
    async def namespaces(self) -> list[str]:
        """Every registered namespace, oldest first."""

    @abstractmethod
    async def load_runs(
        self, namespace: str, run_ids: Sequence[str], *, only: Collection[str] | None = None
    ) -> dict[str, StoredRun]:
        """The stored state of each run (runs never stored are absent). With ``only``, a
        store may decode just those run fields and no steps (the rest at their defaults): a
        brief view, for reading only."""

    async def load(self, run_id: str) -> RunView | None:
        """See :meth:`ViewReader.load`: the run as stored in the live namespace."""
        namespace = await self.live_namespace()
        if namespace is None:
            return None
        stored = (await self.load_runs(namespace, [run_id])).get(run_id)
        return None if stored is None else stored.view

    async def load_many(self, run_ids: Sequence[str]) -> dict[str, RunView]:
        """See :meth:`ViewReader.load_many`: the runs as stored in the live namespace."""
        namespace = await self.live_namespace()
        if namespace is None or not run_ids:
            return {}
        return {r: s.view for r, s in (await self.load_runs(namespace, run_ids)).items()}

    reads_every_partition = True

    async def load_at(self, run_id: str, partitions: Sequence[TopicPartition]) -> ViewAt | None:
        """See :meth:`ViewReader.load_at`: progress first, then the view, in one namespace that
        is still live afterwards (a namespace is dropped only once it is no longer live)."""
        at = await self.load_at_every(run_id)
        if at is None:
            return None
        return replace(at, progress={tp: at.progress.get(tp, 0) for tp in partitions})

    async def load_at_every(self, run_id: str) -> ViewAt | None:
        """See :meth:`ViewReader.load_at_every` (as :meth:`load_at`)."""
        namespace = await self.live_namespace()
        if namespace is None:
            return None
        progress = await self.read_progress(namespace)
        stored = (await self.load_runs(namespace, [run_id])).get(run_id)
        if await self.live_namespace() != namespace:
            return None  # a rebuild was swapped in meanwhile: read the log instead
        return ViewAt(
            view=None if stored is None else stored.view,
            progress=progress,
            parked=[] if stored is None else list(stored.parked),
            dropped_from=0 if stored is None else stored.dropped_from,
        )

    async def load_many_at(
        self,
        partitions: Mapping[str, Sequence[TopicPartition]],
        *,
        only: Collection[str] | None = None,
    ) -> dict[str, ViewAt] | None:
        """See :meth:`ViewReader.load_many_at`: progress first, then every run's view, in one
        namespace that is still live afterwards (as :meth:`load_at`)."""
        namespace = await self.live_namespace()
        if namespace is None:
            return None
        progress = await self.read_progress(namespace)
        runs = list(partitions)
        stored = await self.load_runs(namespace, runs, only=only) if runs else {}
        if await self.live_namespace() != namespace:
            return None  # a rebuild was swapped in meanwhile: read the log instead
        found: dict[str, ViewAt] = {}
        for run_id in runs:
            s = stored.get(run_id)
            found[run_id] = ViewAt(
                view=None if s is None else s.view,
                progress={tp: progress.get(tp, 0) for tp in partitions[run_id]},
                parked=[] if s is None else list(s.parked),
            )
        return found

    @abstractmethod
    async def write_runs(self, namespace: str, writes: Sequence[RunWrite]) -> WriteOutcome:
        """Store each run atomically unless its token moved (a conflict, reported, not written).

        A finished run is given the retention TTL; one already past it is deleted (expired).
        """

    async def write_fresh(
        self, namespace: str, writes: Sequence[RunWrite], updates: Mapping[str, IndexUpdate]
    ) -> WriteOutcome:
        """Store runs and then their index entries (``updates`` by run id) in a namespace that
        nobody else writes or reads yet (a rebuild's), as :meth:`write_runs` and
        :meth:`update_indexes` would: a run past retention is written nowhere and indexed
        nowhere (``outcome.expired``). Raises RuntimeError if a run was there already. Stores
        with a cheaper way to fill a fresh namespace override this (the Redis store)."""
        outcome = await self.write_runs(namespace, writes)
        if outcome.conflicts:
            msg = f"runs {sorted(outcome.conflicts)[:3]} changed in a fresh namespace"
            raise RuntimeError(msg)
        await self.update_indexes(
            namespace, [updates[w.run_id] for w in writes if w.run_id not in outcome.expired]
        )
        return outcome

    async def write_fresh_stored(self, namespace: str, runs: Sequence[FreshRun]) -> WriteOutcome:
        """:meth:`write_fresh` of runs already encoded: what is stored is ``runs``' fields as
        they are. Stores that can take them as bytes override this (the Redis store); here each
        run is decoded into its view first (``layout.decode_run``) and written as a view."""
        writes = []
        for run in runs:
            view = decode_run(run.fields, run.steps, run.effects)
            dropped = dropped_of(run.fields)
            writes.append(
                RunWrite(
                    run_id=run.run_id,
                    expected=None,
                    view=view,
                    steps=set(view.steps),
                    effects=set(view.effects),
                    parked=run.parked,
                    parked_changed=bool(run.parked),
                    dropped_from=dropped,
                )
            )
        return await self.write_fresh(namespace, writes, {r.run_id: r.index for r in runs})

    @abstractmethod
    async def update_indexes(
        self,
        namespace: str,
        updates: Sequence[IndexUpdate],
        progress: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Apply index entries (idempotent), then raise ``progress`` in the same atomic step.

        Raises :class:`ViewsWipedError` (and writes nothing) if the namespace lost its birth
        mark: its progress vanished, so views written now would be partial.
        """

    async def commit(
        self,
        namespace: str,
        writes: Sequence[RunWrite],
        updates: Sequence[IndexUpdate],
        progress: Mapping[TopicPartition, int],
        floors: Mapping[TopicPartition, int] | None = None,
    ) -> WriteOutcome:
        """Store a batch: the runs, their index entries and ``progress``.

        A run whose token moved is a conflict; it, and whatever the store writes in the same
        atomic step as it, is left unwritten (``outcome.unwritten``): neither its index entries
        nor the progress covering it are written, so the caller refolds and commits those runs
        again. An index entry of a run that expired (past retention) becomes its removal.
        ``floors`` are offsets the stored progress must have reached (else
        :class:`ViewsRegressedError`, nothing of the partition written). Stores that can do
        all of it in one atomic step override this (the Redis store: one per slot group).
        """
        if floors:
            await self.record_progress(namespace, {}, floors)
        outcome = await self.write_runs(namespace, writes)
        views = {w.run_id: w.view for w in writes}
        kept = [
            IndexUpdate(
                run_id=u.run_id, status=None, closed_intents=frozenset(views[u.run_id].effects)
            )
            if u.run_id in outcome.expired
            else u
            for u in updates
            if u.run_id not in outcome.conflicts
        ]
        outcome.unwritten = set(outcome.conflicts)
        await self.update_indexes(namespace, kept, None if outcome.conflicts else progress)
        return outcome

    def plan_commit(
        self,
        namespace: str,
        writes: Sequence[RunWrite],
        updates: Sequence[IndexUpdate],
        progress: Mapping[TopicPartition, int],
        floors: Mapping[TopicPartition, int] | None = None,
    ) -> Callable[[], Awaitable[WriteOutcome]]:
        """:meth:`commit` in two halves: what can be prepared now (encoding), and a call that
        sends it later. Nothing is written before the call; the call writes what :meth:`commit`
        would have written at that moment. A store that encodes while the caller waits for an
        earlier commit overrides this (the Redis store); this one only defers :meth:`commit`."""
        planned = (
            list(writes),
            list(updates),
            dict(progress),
            None if floors is None else dict(floors),
        )

        async def send() -> WriteOutcome:
            return await self.commit(namespace, *planned)

        return send

    @abstractmethod
    async def record_progress(
        self,
        namespace: str,
        offsets: Mapping[TopicPartition, int],
        floors: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Raise each partition's applied-up-to offset (never lowers it); first check that the
        stored progress reached ``floors`` (else :class:`ViewsRegressedError`, nothing raised)."""

    @abstractmethod
    async def read_progress(self, namespace: str) -> dict[TopicPartition, int]:
        """Every partition's applied-up-to offset in ``namespace``."""

    @abstractmethod
    async def overdue_parked(self, namespace: str, parked_before: int) -> list[str]:
        """Runs that have had events parked since before ``parked_before`` (epoch ms)."""

    async def count_parked(self, namespace: str) -> int:
        """How many runs have events parked (a count only, for the metrics page)."""
        return len(await self.overdue_parked(namespace, 2**62))

    @abstractmethod
    async def drop_finished_before(self, namespace: str, before: int) -> int:
        """Unlist finished runs whose last event is older than ``before`` (their keys expired)."""

    @abstractmethod
    async def prune(self, namespace: str) -> int:
        """Drop index entries of runs whose keys expired; return how many."""

    @abstractmethod
    async def snapshot(self, namespace: str) -> dict[str, SnapshotValue]:
        """Every key of ``namespace`` (relative name) except progress, normalized for comparing.

        Scores of the parked index are wall-clock times and TTLs differ by when they were set:
        both are left out (members and "has a TTL" are kept).
        """
