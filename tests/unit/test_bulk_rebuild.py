"""Rebuild's in-memory fold (projector/bulk.py) against the live projector, on in-memory ports."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest

from agentledger.bus.partitioning import partition_for, run_key
from agentledger.events import EventCodec, RunEvent
from agentledger.events.models import EffectIntended
from agentledger.projector import bulk
from agentledger.projector.bulk import (
    BulkCounts,
    InProcessReplayer,
    PartitionFold,
    Progress,
    Replayer,
)
from agentledger.projector.ports import Record
from agentledger.projector.rebuild import compare, replay_into_new_namespace
from agentledger.views.memory_store import MemoryViewStore
from agentledger.views.store import FreshRun, TopicPartition, WriteOutcome
from tests.unit.test_fold_into_store import TOPICS, World, run_events


def mixed_history(world: World) -> list[Record]:
    """Finished runs, a run left with an open intent, a stale zombie write, a run whose gap
    stays open, a long-finished run (past retention) and garbage, interleaved across runs."""
    rng = random.Random(3)
    pieces: list[list[RunEvent]] = []
    for n in range(12):
        pieces.append(run_events(f"r{n:02d}", steps=1 + n % 3))
    open_run = run_events("open", steps=1)
    pieces.append([e for e in open_run if not type(e).__name__.startswith(("EffectRec", "RunF"))])
    takeover = run_events("zombie", steps=1, fence=2)
    zombie = run_events("zombie", steps=1, fence=1)[3]
    pieces.append([*takeover[:5], zombie.model_copy(update={"seq": 4}), *takeover[5:]])
    gapped = run_events("gap", steps=1)
    pieces.append([gapped[0], *gapped[2:]])
    old = [e.model_copy(update={"occurred_at": 1}) for e in run_events("old", steps=1)]
    pieces.append(old)
    events = [e for piece in pieces for e in piece]
    order = sorted(range(len(events)), key=lambda i: (events[i].seq, rng.random()))
    records = world.write([events[i] for i in order])
    records.append(world.log.append(TOPICS.steps, 0, b"not avro"))
    return records


async def test_bulk_rebuild_equals_the_live_projector_key_for_key() -> None:
    """Folding each partition in memory and writing every run once stores the same keys as the
    live projector applying the same records in small batches (indexes, parked, expiry)."""
    world = World(retention_ms=3_600_000)
    records = mixed_history(world)
    live = world.projector()
    by_tp: dict[tuple[str, int], list[Record]] = {}
    for rec in records:
        by_tp.setdefault(rec.tp, []).append(rec)
    ordered = sorted(records, key=lambda r: (r.offset, r.topic, r.partition))
    for i in range(0, len(ordered), 7):
        await live.process(ordered[i : i + 7])
    live_ns = await world.store.live_namespace()
    assert live_ns is not None
    seen: list[Progress] = []
    replay = await replay_into_new_namespace(
        world.store, world.log, TOPICS.run_topics, partitions=2, chunk=5, on_progress=seen.append
    )
    result = compare(
        await world.store.snapshot(live_ns), await world.store.snapshot(replay.namespace)
    )
    assert result.differences == []
    assert result.keys_compared > 20
    assert await world.store.read_progress(replay.namespace) == {
        tp: recs[-1].offset + 1 for tp, recs in by_tp.items()
    }
    assert replay.records == len(records)
    assert replay.dead_letters == 1
    assert seen[-1].records == len(records)


def test_a_partition_fold_carries_parked_events_across_chunks() -> None:
    """Events that arrive ahead of their gap in one chunk are applied when a later chunk fills
    it: the run is written once, complete, with nothing parked."""
    codec = EventCodec()
    events = run_events("r1", steps=2)
    later, first = events[3:], events[:3]
    counts = BulkCounts()
    fold = PartitionFold(codec, counts)
    as_records = [
        Record(TOPICS.steps, 0, n, run_key(e.run_id), codec.encode(e))
        for n, e in enumerate(later + first)
    ]
    fold.add(as_records[: len(later)])
    fold.add(as_records[len(later) :])
    writes, updates = fold.writes()
    assert [w.run_id for w in writes] == ["r1"]
    assert writes[0].parked == []
    assert writes[0].view.applied_seq == len(events)
    assert updates["r1"].status == "succeeded"
    assert counts.applied == len(events)


def test_an_open_intent_is_indexed_by_the_bulk_write() -> None:
    """A run left with an intent and no outcome is written with its intent in the index."""
    codec = EventCodec()
    events = run_events("r1", steps=1)[:3]
    assert isinstance(events[-1], EffectIntended)
    fold = PartitionFold(codec, BulkCounts())
    fold.add(
        [
            Record(TOPICS.steps, 0, n, run_key(e.run_id), codec.encode(e))
            for n, e in enumerate(events)
        ]
    )
    _, updates = fold.writes()
    assert list(updates["r1"].open_intents) == ["r1:0:pay:0"]
    assert updates["r1"].status == "running"


def test_progress_line_says_records_rate_and_eta() -> None:
    """The operator's line: records done of the total, the rate so far and the time left."""
    line = Progress(records=250_000, total=1_000_000, seconds=5.0).line()
    assert line == "rebuild: 250,000/1,000,000 records (25%), 50,000/s, ETA 15 s"
    assert Progress(records=0, total=10, seconds=0.0).eta_s is None


class _Delegating(Replayer):
    """A replayer that counts its calls and folds through the in-process one."""

    def __init__(self, world: World, min_records: int) -> None:
        self.min_records = min_records
        self.calls = 0
        self._inner = InProcessReplayer(world.store, world.log, EventCodec(), chunk=5)

    async def replay(
        self,
        namespace: str,
        ranges: Mapping[TopicPartition, tuple[int, int]],
        *,
        partitions: int | None,
        parked_max: int,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> BulkCounts:
        self.calls += 1
        return await self._inner.replay(
            namespace, ranges, partitions=partitions, parked_max=parked_max
        )


async def test_a_log_smaller_than_the_replayers_minimum_folds_in_this_process() -> None:
    """A replayer is used for a log of at least its ``min_records`` records; a smaller log is
    folded in this process (children would cost more to start than they save), with the same
    result."""
    world = World(retention_ms=3_600_000)
    records = mixed_history(world)
    small = _Delegating(world, min_records=len(records) + 1)
    enough = _Delegating(world, min_records=len(records))
    here = await replay_into_new_namespace(
        world.store, world.log, TOPICS.run_topics, partitions=2, replayer=small
    )
    there = await replay_into_new_namespace(
        world.store, world.log, TOPICS.run_topics, partitions=2, replayer=enough
    )
    assert (small.calls, enough.calls) == (0, 1)
    assert here.records == there.records == len(records)
    result = compare(
        await world.store.snapshot(here.namespace), await world.store.snapshot(there.namespace)
    )
    assert result.differences == []
    assert result.keys_compared > 20


@pytest.mark.parametrize("number_known", [False, True])
def test_records_off_their_keys_partition_are_dead_letters_not_folded(number_known: bool) -> None:
    """A run's records on a partition its key does not belong on are counted as dead letters
    and never folded, whether or not the fold is told its partition number; the runs that are
    in place are folded as usual."""
    codec = EventCodec()
    partitions = 4
    home = {r: partition_for(run_key(r), partitions) for r in (f"r{n}" for n in range(20))}
    placed = next(r for r, p in home.items() if p == 1)
    stray = next(r for r, p in home.items() if p != 1)
    counts = BulkCounts()
    fold = PartitionFold(codec, counts, partitions, number=1 if number_known else None)
    records = [
        Record(TOPICS.steps, 1, n, run_key(e.run_id), codec.encode(e))
        for n, e in enumerate(run_events(placed, steps=1) + run_events(stray, steps=1))
    ]
    fold.add(records[:5])
    fold.add(records[5:])
    writes, _ = fold.writes()
    assert [w.run_id for w in writes] == [placed]
    assert counts.dead_letters == len(run_events(stray, steps=1))
    assert counts.applied == len(run_events(placed, steps=1))


def _folded(runs: int) -> PartitionFold:
    """A partition fold of ``runs`` finished one-step runs."""
    codec = EventCodec()
    fold = PartitionFold(codec, BulkCounts())
    events = [e for n in range(runs) for e in run_events(f"r{n:02d}", steps=1)]
    fold.add(
        [
            Record(TOPICS.steps, 0, n, run_key(e.run_id), codec.encode(e))
            for n, e in enumerate(events)
        ]
    )
    return fold


def test_fresh_slices_are_the_fresh_runs_in_order() -> None:
    """Slices of at most the size asked, which together are fresh()'s runs in its order."""
    fold = _folded(10)
    slices = list(fold.fresh_slices(3))
    assert [len(s) for s in slices] == [3, 3, 3, 1]
    assert [r for s in slices for r in s] == fold.fresh()
    assert [r.run_id for r in fold.fresh()] == [f"r{n:02d}" for n in range(10)]


class _HeldStore:
    """A view store whose fresh writes wait until released; counts the slices it was sent."""

    def __init__(self, inner: MemoryViewStore) -> None:
        self.inner = inner
        self.go = asyncio.Event()
        self.sent: list[int] = []

    async def write_fresh_stored(self, namespace: str, runs: Sequence[FreshRun]) -> WriteOutcome:
        self.sent.append(len(runs))
        await self.go.wait()
        return await self.inner.write_fresh_stored(namespace, runs)


async def test_a_partition_is_encoded_no_further_ahead_than_its_writes_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While Redis has not answered, no more slices are encoded than writes may be in flight;
    once it answers, every run is written once, and the views are fresh()'s."""
    monkeypatch.setattr(bulk, "WRITE_SLICE", 2)
    monkeypatch.setattr(bulk, "WRITES_IN_FLIGHT", 2)
    fold = _folded(9)
    encoded: list[int] = []
    slices = fold.fresh_slices

    def counting(size: int) -> Iterator[list[FreshRun]]:
        for part in slices(size):
            encoded.append(len(part))
            yield part

    monkeypatch.setattr(fold, "fresh_slices", counting)
    memory = MemoryViewStore(key_prefix="u")
    namespace = await memory.create_namespace()
    store = _HeldStore(memory)
    counts = BulkCounts()
    writing = asyncio.create_task(bulk._write(store, namespace, fold, counts))  # type: ignore[arg-type]
    for _ in range(20):
        await asyncio.sleep(0)
    assert encoded == [2, 2]
    assert store.sent == [2, 2]
    store.go.set()
    await writing
    assert encoded == [2, 2, 2, 2, 1]
    assert counts.runs_written == 9
    expected = MemoryViewStore(key_prefix="u")
    other = await expected.create_namespace()
    await expected.write_fresh_stored(other, fold.fresh())
    result = compare(await memory.snapshot(namespace), await expected.snapshot(other))
    assert result.differences == []
    assert result.keys_compared >= 9


async def test_a_failed_slice_write_fails_the_partitions_write() -> None:
    """A slice that Redis refuses is the write's error: it is raised, not lost."""

    class Failing(_HeldStore):
        async def write_fresh_stored(
            self, namespace: str, runs: Sequence[FreshRun]
        ) -> WriteOutcome:
            raise RuntimeError("refused")

    store = Failing(MemoryViewStore(key_prefix="u"))
    with pytest.raises(ExceptionGroup) as caught:
        await bulk._write(store, "ns", _folded(3), BulkCounts())  # type: ignore[arg-type]
    assert caught.group_contains(RuntimeError, match="refused")
