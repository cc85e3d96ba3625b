"""Where the projector is in each partition, and how it never skips or re-applies a record.

Redis holds the truth: per namespace, each partition's applied-up-to offset ("progress"),
raised after every batch. Kafka's committed offsets (faust commits them) are only where
delivery resumes. So whenever delivery (re)starts — a new assignment, a namespace swapped in by
``views rebuild``, Redis flushed — the first delivered offset is compared with the namespace's
progress: records below it are skipped (already applied), and a hole above it is filled by
reading that range directly from Kafka before going on. A quiet partition whose progress stops
short of the log end (transaction markers, or records a revoked owner never applied) is caught
up the same way by :meth:`Projector.tick`, so the SDK's resume barrier always completes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence

import structlog

from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import EventPublisher
from agentledger.errors import ViewsWipedError
from agentledger.events.models import Alert, now_ms
from agentledger.projector.applier import Applier
from agentledger.projector.findings import gap_alert, wiped_alert
from agentledger.projector.killpoints import ProjectorKillSwitch
from agentledger.projector.metrics import Metrics
from agentledger.projector.parking import needs_reread
from agentledger.projector.ports import LogReader, LogRecord
from agentledger.views.store import TopicPartition, ViewStore

log = structlog.get_logger(__name__)

_UNLIST_EVERY_MS = 60_000
_PROBE_AFTER_TICKS = 1
_WIPE_ROUNDS = 3


class Projector:
    """Applies delivered batches in order per partition; one instance per process."""

    def __init__(
        self,
        store: ViewStore,
        reader: LogReader,
        publisher: EventPublisher,
        applier: Applier,
        *,
        metrics: Metrics,
        partitions: int,
        chunk: int = 5000,
        gap_alert_ms: int = 30_000,
        namespace: str | None = None,
        group: str | None = None,
        retention_ms: int | None = None,
        pointer_ttl_s: float = 0.5,
        kill: ProjectorKillSwitch | None = None,
    ) -> None:
        self._store = store
        self._kill = kill or ProjectorKillSwitch()
        self._reader = reader
        self._publisher = publisher
        self._applier = applier
        self._metrics = metrics
        self._partitions = partitions
        self._chunk = chunk
        self._gap_alert_ms = gap_alert_ms
        self._fixed_namespace = namespace
        self._group = group
        self._retention_ms = retention_ms
        self._last_unlist = 0
        self._pointer_read_at = 0.0
        self._pointer_ttl_s = pointer_ttl_s
        self._lock = asyncio.Lock()
        self._namespace: str | None = None
        self._pos: dict[TopicPartition, int] = {}
        # what the store's progress is known to hold (read or written by us): it never goes
        # below, unless a Redis failover lost writes (ViewsRegressedError, then re-anchored)
        self._floor: dict[TopicPartition, int] = {}
        self._delivering: set[TopicPartition] = set()
        self._assigned: set[TopicPartition] = set()
        self._seen_at_tick: dict[TopicPartition, int] = {}
        self._stalled: dict[TopicPartition, int] = {}
        self._gap_alerted: set[tuple[str, int]] = set()
        self._reread_at: set[tuple[str, int, int]] = set()
        self._reread: set[TopicPartition] = set()
        self._moved_at: dict[TopicPartition, float] = {}
        self._moved_pos: dict[TopicPartition, int | None] = {}

    @property
    def positions(self) -> dict[TopicPartition, int]:
        """The next offset to apply in each partition this projector tracks."""
        return dict(self._pos)

    # --- assignment ---------------------------------------------------------------------

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """The consumer group gave us ``tps`` (all of our partitions, after a rebalance)."""
        new = set(tps)
        for tp in (self._assigned - new) | (new - self._assigned):
            self._forget(tp)
        self._assigned = new
        self._metrics.assigned = set(new)

    def revoke(self, tps: Iterable[TopicPartition]) -> None:
        """The consumer group took ``tps`` away."""
        for tp in tps:
            self._assigned.discard(tp)
            self._forget(tp)
        self._metrics.assigned = set(self._assigned)

    async def reset_delivery(self) -> None:
        """Forget positions and cached views: the next delivery re-anchors on stored progress."""
        async with self._lock:
            self._pos.clear()
            self._floor.clear()
            self._delivering.clear()
            self._seen_at_tick.clear()
            self._stalled.clear()
            self._applier.reset()
            self._pointer_read_at = 0.0

    def wedged(self, after_s: float) -> list[TopicPartition]:
        """Assigned partitions behind the log end whose position has not moved for ``after_s``."""
        now = time.monotonic()
        return sorted(
            tp
            for tp in self._assigned
            if self._metrics.lag.get(tp, 0) > 0 and now - self._moved_at.get(tp, now) > after_s
        )

    def _forget(self, tp: TopicPartition) -> None:
        self._applier.forget([tp])
        self._reread.discard(tp)
        self._moved_at.pop(tp, None)
        self._pos.pop(tp, None)
        self._floor.pop(tp, None)
        self._delivering.discard(tp)
        self._seen_at_tick.pop(tp, None)
        self._stalled.pop(tp, None)
        self._metrics.lag.pop(tp, None)

    # --- delivered batches --------------------------------------------------------------

    async def process(self, records: Sequence[LogRecord], *, assigned_only: bool = True) -> None:
        """Apply a delivered batch (records of each partition in offset order); after a wipe
        found on the way, the batch is applied again into the fresh namespace."""
        for _ in range(_WIPE_ROUNDS):
            async with self._lock:
                try:
                    await self._process(records, assigned_only=assigned_only)
                except ViewsWipedError as e:
                    await self._rebase(e.namespace, "its progress vanished")
                    continue
                return
        msg = f"the views were wiped {_WIPE_ROUNDS} times during one batch"
        raise RuntimeError(msg)

    async def _process(self, records: Sequence[LogRecord], *, assigned_only: bool) -> None:
        namespace = await self._current_namespace()
        by_tp: dict[TopicPartition, list[LogRecord]] = {}
        for rec in records:
            tp = (rec.topic, rec.partition)
            recs = by_tp.get(tp)
            if recs is None:
                recs = by_tp[tp] = []
            recs.append(rec)
        keep: list[LogRecord] = []
        ends: dict[TopicPartition, int] = {}
        for tp, recs in by_tp.items():
            if assigned_only and tp not in self._assigned:
                continue  # a revoked partition's leftovers: its new owner applies them
            await self._anchor(namespace, tp, first=recs[0].offset)
            start = self._pos[tp]
            kept = recs if recs[0].offset >= start else [r for r in recs if r.offset >= start]
            if kept:
                keep.extend(kept)
                ends[tp] = max(r.offset for r in kept) + 1
        if keep or self._applier.held_due():
            await self._apply(namespace, keep, ends, hold=True)
        await self._reread_runs(namespace)
        self._metrics.batches += 1

    async def _current_namespace(self) -> str:
        """The live namespace, looked up at most every ``pointer_ttl_s``.

        A rebuild's swap is seen a moment late at worst: what is written to the old namespace
        meanwhile is re-read into the new one when delivery re-anchors on its progress. A
        pointer that vanished under a namespace we were writing is a wipe (see :meth:`_rebase`).
        """
        now = time.monotonic()
        if self._namespace is not None and now - self._pointer_read_at < self._pointer_ttl_s:
            return self._namespace
        self._pointer_read_at = now
        namespace: str | None = self._fixed_namespace
        if namespace is None:
            namespace = await self._store.live_namespace()
            if namespace is None and self._namespace is not None:
                return await self._rebase(self._namespace, "the live pointer vanished")
            namespace = namespace or await self._store.live_namespace(create=True)
        if namespace is None:
            msg = "the view store gave no live namespace"
            raise RuntimeError(msg)
        if namespace != self._namespace:
            if self._namespace is not None:
                log.info("namespace_switched", old=self._namespace, new=namespace)
            await self._adopt(namespace)
        return namespace

    async def _adopt(self, namespace: str) -> None:
        """Write into ``namespace`` from now on, re-anchored on its progress.

        faust will not deliver again what it delivered into the previous namespace, so every
        assigned partition not delivered since is read up to the log end by :meth:`tick`.
        """
        if self._fixed_namespace is None:
            await self._store.mark_namespace(namespace)
        switched = self._namespace is not None
        self._namespace = namespace
        self._metrics.namespace = namespace
        self._pos.clear()
        self._floor.clear()
        self._delivering.clear()
        self._seen_at_tick.clear()
        self._stalled.clear()
        self._applier.reset()
        # at the first namespace faust delivers from the group's offsets as usual
        self._reread = set(self._assigned) if switched else set()

    async def _rebase(self, lost: str, why: str) -> str:
        """The views of ``lost`` vanished (FLUSHALL, eviction, deleted keys): point at a fresh
        namespace, re-project it from the log, and say so in one ``views.wiped`` alert.

        Of several projectors finding the same wipe, the one whose pointer write wins raises
        the alert; the others adopt its namespace. A namespace that vanished because a rebuild
        swapped it out and dropped it is not a wipe: the rebuilt one is adopted silently.
        """
        if self._fixed_namespace is not None:
            msg = f"namespace {lost} vanished while it was being replayed ({why})"
            raise RuntimeError(msg)
        if lost != self._namespace:
            return await self._current_namespace()
        fresh = await self._store.create_namespace()
        live = await self._store.replace_live(lost, fresh)
        if live == fresh:
            log.error("views_wiped", namespace=lost, fresh=fresh, why=why)
            self._metrics.wipes += 1
            alert = wiped_alert(lost, fresh, why)
            await self._publisher.publish([alert])
            self._metrics.count_alerts([alert.code])
        else:
            await self._store.drop_namespace(fresh)
        await self._store.drop_namespace(lost)  # what was written after the wipe is partial
        self._pointer_read_at = time.monotonic()
        await self._adopt(live)
        return live

    async def _anchor(self, namespace: str, tp: TopicPartition, *, first: int) -> None:
        """On the first delivery of ``tp``: skip what is applied, fill a hole before ``first``."""
        if tp in self._delivering:
            return
        start = await self._start_of(namespace, tp)
        self._delivering.add(tp)
        self._reread.discard(tp)  # delivery goes on from ``first``; the hole below is read now
        if start < first:
            await self._catch_up(namespace, {tp: (start, first)})

    async def _start_of(self, namespace: str, tp: TopicPartition) -> int:
        if tp not in self._pos:
            progress = (await self._store.read_progress(namespace)).get(tp)
            if progress is None:
                progress = (await self._reader.beginning_offsets([tp]))[tp]
            else:
                self._floor[tp] = progress
            self._pos[tp] = progress
        return self._pos[tp]

    async def _catch_up(
        self, namespace: str, ranges: dict[TopicPartition, tuple[int, int]]
    ) -> None:
        """Apply every record of ``ranges`` straight from the log, then mark the ranges done."""
        self._metrics.catch_ups += 1
        log.debug("catch_up", ranges={f"{t}:{p}": r for (t, p), r in ranges.items()})
        target = sum(max(0, end - start) for start, end in ranges.values())
        self._metrics.rebuild_target += target
        done = 0
        async for chunk in self._reader.read(ranges, self._chunk):
            await self._apply(namespace, chunk)
            done += len(chunk)
            self._metrics.rebuild_done += len(chunk)
        # the offsets a range spans include transaction markers no chunk delivers
        self._metrics.rebuild_done += max(0, target - done)
        ends = {tp: end for tp, (_, end) in ranges.items()}
        durable = self._applier.below_held(ends)
        await self._store.record_progress(namespace, durable, self._floors(ends))
        for tp, end in ends.items():
            self._pos[tp] = max(self._pos.get(tp, end), end)
            self._floor[tp] = max(self._floor.get(tp, durable[tp]), durable[tp])
        await self._reread_runs(namespace)  # the log is free again: no read of it is under way

    async def _reread_runs(self, namespace: str, runs: Iterable[str] = ()) -> None:
        """Fold again, from the log, every run that dropped parked events over the cap and has
        applied everything before them (see :mod:`.parking`): the run's records on its
        partition of every run topic, from the beginning to the current end (read_committed),
        through the same decode and fold as any batch. Records past our position are folded
        early; delivered later, they are duplicates."""
        wanted = self._applier.take_rereads() | set(runs)
        topics = sorted({t for t, _ in self._assigned} | {t for t, _ in self._pos})
        for run_id in sorted(wanted):
            key = run_key(run_id)
            home = partition_for(key, self._partitions)
            tps = [(t, home) for t in topics]
            begins = await self._reader.beginning_offsets(tps)
            ends = await self._reader.end_offsets(tps)
            ranges = {tp: (begins[tp], ends[tp]) for tp in tps}
            records = [
                rec
                async for chunk in self._reader.read(ranges, self._chunk)
                for rec in chunk
                if rec.key == key
            ]
            self._metrics.rereads += 1
            log.info("parked_overflow_reread", run_id=run_id, records=len(records))
            await self._applier.apply(namespace, records, complete=frozenset({run_id}))
        self._applier.take_rereads()  # a complete fold leaves no run needing another

    async def _apply(
        self,
        namespace: str,
        records: Sequence[LogRecord],
        ends: dict[TopicPartition, int] | None = None,
        *,
        hold: bool = False,
    ) -> None:
        """Apply ``records`` and raise progress to ``ends`` (each partition's last offset + 1,
        computed from ``records`` unless given), or to just before a record held in memory
        (``hold``: see Applier.apply); partitions with held events are raised as their holds
        end, whichever batch ends them."""
        if ends is None:
            ends = {}
            for rec in records:
                tp = (rec.topic, rec.partition)
                ends[tp] = max(ends.get(tp, 0), rec.offset + 1)
        held = self._applier.held_partitions
        if held:
            for tp, pos in self._pos.items():
                if tp[1] in held and tp not in ends:
                    ends[tp] = pos
        written = await self._applier.apply(namespace, records, ends, self._floors(ends), hold=hold)
        # Redis holds the batch; positions (so the group's offsets) do not yet (DESIGN.md §16)
        self._kill.reached("batch_committed")
        self._metrics.records += len(records)
        now = time.monotonic()
        for tp, end in ends.items():
            self._pos[tp] = max(self._pos.get(tp, end), end)
            durable = written.get(tp, end)
            # what the store holds: a partition's progress stops before its held records
            self._floor[tp] = max(self._floor.get(tp, durable), durable)
            # moving, even while a long catch-up holds the lock and no tick refreshes the lag
            self._moved_at[tp] = now
            self._moved_pos[tp] = self._pos[tp]

    def _floors(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._floor[tp] for tp in tps if tp in self._floor}

    # --- periodic work ------------------------------------------------------------------

    async def tick(self) -> None:
        """Bring quiet partitions' progress to the log end, refresh lag, raise gap alerts.

        A partition faust has not delivered since assignment resumes at the group's committed
        offset: records between our progress and it are applied from the log here. A partition
        whose position has not moved since the last tick is probed up to the log end: if only
        transaction markers (or aborted records) remain, progress moves to the end; if records
        remain, faust delivers them.
        """
        tps = sorted(self._assigned)
        if not tps:
            return
        ends = await self._reader.end_offsets(tps)
        async with self._lock:
            try:
                namespace = await self._fill_quiet(tps, ends)
                if self._applier.held_due():
                    # held events past the hold time are parked, and their partitions'
                    # progress raised, even when no batch comes (DESIGN.md §16)
                    await self._apply(namespace, [], hold=True)
            except ViewsWipedError as e:
                await self._rebase(e.namespace, "its progress vanished")
                return  # the next tick reads the fresh namespace from the log
            tps = [tp for tp in tps if tp in self._assigned]
            for tp in tps:
                same = self._seen_at_tick.get(tp) == self._pos[tp]
                self._stalled[tp] = self._stalled.get(tp, 0) + 1 if same else 0
            self._seen_at_tick = dict(self._pos)
            probes = {
                tp: (self._pos[tp], ends[tp])
                for tp in tps
                if tp not in self._reread
                and self._stalled[tp] >= _PROBE_AFTER_TICKS
                and ends[tp] > self._pos[tp]
            }
        if probes:
            # outside the lock: batches go on while the probe waits for the broker
            busy = await self._reader.nonempty(probes)
            async with self._lock:
                if namespace == self._namespace:
                    done = {
                        tp: end
                        for tp, (start, end) in probes.items()
                        if tp not in busy and self._pos.get(tp) == start
                    }
                    if done:
                        durable = self._applier.below_held(done)
                        await self._store.record_progress(namespace, durable, self._floors(done))
                        self._pos.update(done)
                        self._floor.update(durable)
        lag = {tp: max(0, ends[tp] - self._pos.get(tp, ends[tp])) for tp in tps}
        now = time.monotonic()
        for tp in tps:
            moved = self._moved_pos.get(tp) != self._pos.get(tp)
            if moved or lag[tp] == 0 or tp not in self._moved_at:
                self._moved_at[tp] = now
                self._moved_pos[tp] = self._pos.get(tp)
        self._metrics.lag = lag
        await self._alert_gaps(namespace)
        await self._unlist_expired(namespace)

    async def _fill_quiet(self, tps: list[TopicPartition], ends: dict[TopicPartition, int]) -> str:
        """Catch up partitions faust is not delivering: up to the group's committed offset
        (faust delivers from there), or up to the log end after a namespace change (faust
        will not deliver again what it delivered before)."""
        namespace = await self._current_namespace()
        tps = [tp for tp in tps if tp in self._assigned]
        starts = {tp: await self._start_of(namespace, tp) for tp in tps}
        quiet = [tp for tp in tps if tp not in self._delivering]
        reread = [tp for tp in quiet if tp in self._reread]
        if reread:  # the end now, not the one read before the switch
            ends.update(await self._reader.end_offsets(reread))
        quiet = [tp for tp in quiet if starts[tp] < ends[tp]]
        committed = (
            await self._reader.committed_offsets(self._group, quiet)
            if quiet and self._group
            else {}
        )
        fills = {
            tp: (starts[tp], ends[tp] if tp in self._reread else min(committed[tp], ends[tp]))
            for tp in quiet
            if tp in self._reread or committed.get(tp, 0) > starts[tp]
        }
        if fills:
            await self._catch_up(namespace, fills)
        self._reread.difference_update(reread)
        return namespace

    async def _unlist_expired(self, namespace: str) -> None:
        """Once a minute: finished runs whose keys reached their TTL leave the status index."""
        now = now_ms()
        if self._retention_ms is None or now - self._last_unlist < _UNLIST_EVERY_MS:
            return
        self._last_unlist = now
        await self._store.drop_finished_before(namespace, now - self._retention_ms)

    async def _alert_gaps(self, namespace: str) -> None:
        now = now_ms()
        overdue = await self._store.overdue_parked(namespace, now - self._gap_alert_ms + 1)
        # a gap is only a gap once the run's partitions are applied up to the log end: before
        # that (a catch-up, a re-projection after a wipe) the missing seq may just be unread
        behind = {tp[1] for tp in self._assigned if self._metrics.lag.get(tp, 1) > 0}
        mine = {p for _, p in self._assigned} - behind
        candidates = [r for r in overdue if partition_for(run_key(r), self._partitions) in mine]
        if not candidates:
            return
        stored = await self._store.load_runs(namespace, candidates[:100])
        alerts: list[Alert] = []
        # a run marked to re-read whose re-read never happened (a crash right after the write
        # that made it due): re-read once per state, under the lock batches take
        due = {
            r
            for r, run in stored.items()
            if needs_reread(run.view, run.dropped_from)
            and (r, run.view.applied_seq, run.dropped_from) not in self._reread_at
        }
        if due:
            self._reread_at.update(
                (r, stored[r].view.applied_seq, stored[r].dropped_from) for r in due
            )
            async with self._lock:
                if namespace == self._namespace:
                    await self._reread_runs(namespace, due)
        for run_id, run in stored.items():
            marker = (run_id, run.view.applied_seq)
            if run_id in due or not (run.parked or run.dropped_from) or marker in self._gap_alerted:
                continue
            self._gap_alerted.add(marker)
            seqs = sorted(e.seq for e in run.parked)
            log.warning("gap_open", run_id=run_id, applied_seq=run.view.applied_seq, parked=seqs)
            alerts.append(
                gap_alert(run_id, run.view.applied_seq, seqs, self._gap_alert_ms, run.dropped_from)
            )
        if alerts:
            await self._publisher.publish(alerts)
            self._metrics.count_alerts(a.code for a in alerts)

    # --- rebuild ------------------------------------------------------------------------

    async def replay(self, ranges: dict[TopicPartition, tuple[int, int]]) -> None:
        """Apply ``ranges`` from the log into this projector's namespace (rebuild, verify)."""
        async with self._lock:
            namespace = await self._current_namespace()
            for tp, (start, _) in ranges.items():
                self._pos.setdefault(tp, start)
            await self._catch_up(namespace, ranges)
