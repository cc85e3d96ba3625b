"""Events waiting for a gap held in memory (DESIGN.md §16): written once, never lost."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agentledger.projector.ports import Record
from agentledger.projector.runner import Projector
from agentledger.views.memory_store import MemoryViewStore
from agentledger.views.store import RunWrite, TopicPartition, WriteOutcome
from tests.unit.test_fold_into_store import (
    TOPICS,
    World,
    by_topic_effects_first,
    expected,
    run_events,
)


class CountingStore(MemoryViewStore):
    """A memory store that counts the writes of each run."""

    def __init__(self) -> None:
        super().__init__(key_prefix="u")
        self.writes: dict[str, int] = {}

    async def write_runs(self, namespace: str, writes: Sequence[RunWrite]) -> WriteOutcome:
        for w in writes:
            self.writes[w.run_id] = self.writes.get(w.run_id, 0) + 1
        return await super().write_runs(namespace, writes)


def holding(world: World, hold_s: float = 60.0, group: str | None = None) -> Projector:
    """A projector over the world's log and store that holds waiting events for ``hold_s``
    (in consumer group ``group``, whose committed offsets the world's log keeps)."""
    return world.projector(hold_s=hold_s, group=group)


def counting_world() -> tuple[World, CountingStore]:
    world = World()
    store = CountingStore()
    world.store = store
    return world, store


async def progress(world: World) -> dict[TopicPartition, int]:
    namespace = await world.store.live_namespace()
    assert namespace is not None
    return await world.store.read_progress(namespace)


async def test_a_run_whose_effects_come_a_batch_early_is_written_once() -> None:
    """Effects delivered a batch before the steps they follow are held, not parked: the run is
    written once, when its gap fills, and its view is the in-order one."""
    world, store = counting_world()
    events = run_events("r1")
    recs = by_topic_effects_first(world.write(events))
    effects = [r for r in recs if r.topic == TOPICS.effects]
    rest = [r for r in recs if r.topic != TOPICS.effects]
    proj = holding(world)
    await proj.process(effects)
    assert store.writes == {}
    assert (await world.store.load_runs(await _ns(world), ["r1"])) == {}
    await proj.process(rest)
    assert store.writes == {"r1": 1}
    assert await world.store.load("r1") == expected(events)
    ns = await _ns(world)
    assert (await world.store.load_runs(ns, ["r1"]))["r1"].parked == []
    assert await world.store.overdue_parked(ns, 2**62) == []


async def test_progress_stops_before_a_held_record_until_its_gap_fills() -> None:
    """While a record is held, its partition's progress stays at its offset (a crash re-reads
    it); once the run applies it, progress reaches the end of what was delivered."""
    world, _ = counting_world()
    events = run_events("r1")
    recs = by_topic_effects_first(world.write(events))
    effects = [r for r in recs if r.topic == TOPICS.effects]
    proj = holding(world)
    await proj.process(effects)
    tp = (TOPICS.effects, effects[0].partition)
    assert (await progress(world)).get(tp, 0) == effects[0].offset
    await proj.process([r for r in recs if r.topic != TOPICS.effects])
    assert (await progress(world))[tp] == effects[-1].offset + 1


async def test_a_projector_killed_while_it_holds_events_loses_none() -> None:
    """A projector that dies holding events (no write of them, progress before them) is
    replaced by one that delivers only what comes after: the hole is read from the log and
    every view equals the in-order fold, each event applied once."""
    world, _ = counting_world()
    runs = {f"r{i}": run_events(f"r{i}") for i in range(6)}
    recs: list[Record] = []
    for events in runs.values():
        recs += world.write(events)
    recs = by_topic_effects_first(recs)
    first = [r for r in recs if r.topic == TOPICS.effects]
    later = [r for r in recs if r.topic != TOPICS.effects]
    dying = holding(world, group="g")
    await dying.process(first + later[:3])  # effects held; the first steps records applied
    assert dying.positions  # where delivery resumes: past every record it was given
    world.log.committed["g"] = dying.positions  # as commit_positions leaves them
    del dying  # SIGKILL: whatever it held is gone
    fresh = holding(world, group="g")
    await fresh.process(later[3:])  # faust resumes at the committed offsets
    await fresh.tick()  # quiet partitions: stored progress up to the committed offset
    for run_id, events in runs.items():
        assert await world.store.load(run_id) == expected(events)
    ns = await _ns(world)
    assert await world.store.overdue_parked(ns, 2**62) == []


async def test_events_held_past_the_hold_time_are_parked_by_the_tick() -> None:
    """A gap that does not fill within the hold time leaves its events parked in the store
    (as without holding), and the partition's progress moves past them."""
    world, store = counting_world()
    events = run_events("r1")
    later = world.write(events[1:])  # seq 1 never comes
    proj = holding(world, hold_s=0.01)
    await proj.process(later)
    assert store.writes == {}
    await asyncio.sleep(0.02)
    await proj.tick()
    ns = await _ns(world)
    stored = (await world.store.load_runs(ns, ["r1"]))["r1"]
    assert sorted(e.seq for e in stored.parked) == [e.seq for e in events[1:]]
    ends = {(r.topic, r.partition): r.offset + 1 for r in later}
    current = await progress(world)
    assert all(current[tp] >= end for tp, end in ends.items())


async def test_a_revoked_partition_forgets_its_held_events() -> None:
    """Held events of a revoked partition are dropped and its progress stays before them: the
    partition's next owner applies them from the log."""
    world, _ = counting_world()
    events = run_events("r1")
    recs = by_topic_effects_first(world.write(events))
    effects = [r for r in recs if r.topic == TOPICS.effects]
    proj = holding(world, group="g")
    await proj.process(effects)
    world.log.committed["g"] = proj.positions  # the group's offsets: past the held records
    home = effects[0].partition
    proj.revoke([(t, home) for t in TOPICS.run_topics])
    tp = (TOPICS.effects, home)
    assert (await progress(world)).get(tp, 0) == effects[0].offset
    await proj.tick()  # no longer its partition: nothing of it is written
    assert (await progress(world)).get(tp, 0) == effects[0].offset
    owner = holding(world, group="g")
    await owner.process([r for r in recs if r.topic != TOPICS.effects])
    await owner.tick()  # the effects partition is quiet: read up to the group's offset
    assert await world.store.load("r1") == expected(events)


async def _ns(world: World) -> str:
    namespace = await world.store.live_namespace()
    assert namespace is not None
    return namespace
