"""The projector core on in-memory ports: batches of records folded into a view store."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import Position
from agentledger.events import (
    AcceptanceEvaluated,
    Alert,
    DeadLettered,
    EffectIntended,
    EffectRecorded,
    EventCodec,
    RunEvent,
    RunFinished,
    RunForked,
    RunStarted,
    StepCheckpointed,
    StepStarted,
    TopicNames,
)
from agentledger.events.models import Event, RunRequested
from agentledger.projector.applier import Applier
from agentledger.projector.memory import CollectingPublisher, MemoryLog
from agentledger.projector.metrics import Metrics
from agentledger.projector.parking import DEFAULT_PARKED_MAX
from agentledger.projector.ports import Record
from agentledger.projector.rebuild import compare
from agentledger.projector.runner import Projector
from agentledger.views import RunView, fold
from agentledger.views.memory_store import MemoryViewStore
from agentledger.views.store import IndexUpdate, RunWrite

PARTS = 2
TOPICS = TopicNames("u.")
CODEC = EventCodec()


def run_events(run: str, steps: int = 2, fence: int = 1, first: int = 1) -> list[RunEvent]:
    """A gapless run: per step started, intent, outcome, check, checkpoint; then finished."""
    out: list[RunEvent] = []

    def env() -> dict[str, object]:
        seq = first + len(out)
        return {"run_id": run, "seq": seq, "fence": fence, "worker_id": f"w{fence}"}

    out.append(RunStarted(**env(), agent="a", plan=[f"s{i}" for i in range(steps)]))  # type: ignore[arg-type]
    for i in range(steps):
        key = f"{run}:{i}:pay:0"
        out.append(StepStarted(**env(), step=i, step_name=f"s{i}", attempt=1))  # type: ignore[arg-type]
        out.append(
            EffectIntended(
                **env(),  # type: ignore[arg-type]
                step=i,
                ordinal=0,
                effect="pay",
                provider="p",
                kind="payments",
                idempotency_key=key,
                identity_hash="i",
                payload_hash="h",
            )
        )
        out.append(
            EffectRecorded(
                **env(),  # type: ignore[arg-type]
                step=i,
                effect="pay",
                idempotency_key=key,
                outcome="succeeded",
            )
        )
        out.append(AcceptanceEvaluated(**env(), step=i, attempt=1, check="c", passed=True))  # type: ignore[arg-type]
        out.append(StepCheckpointed(**env(), step=i, step_name=f"s{i}", attempt=1))  # type: ignore[arg-type]
    out.append(RunFinished(**env(), status="succeeded"))  # type: ignore[arg-type]
    return out


class World:
    """A memory log, store and publisher, and projectors over them."""

    def __init__(self, retention_ms: int | None = None, gap_alert_ms: int = 30_000) -> None:
        self.log = MemoryLog()
        for topic in TOPICS.run_topics:
            self.log.add_partitions(topic, PARTS)
        self.store = MemoryViewStore(key_prefix="u", retention_ms=retention_ms)
        self.published = CollectingPublisher()
        self.gap_alert_ms = gap_alert_ms

    def projector(
        self,
        namespace: str | None = None,
        *,
        parked_max: int = DEFAULT_PARKED_MAX,
        hold_s: float = 0.0,
        group: str | None = None,
    ) -> Projector:
        """A projector over this log and store (its runs park at most ``parked_max`` events,
        waiting events are held ``hold_s``, offsets are committed for consumer ``group``)."""
        metrics = Metrics()
        applier = Applier(
            self.store,
            self.published,
            CODEC,
            metrics=metrics,
            cache_size=100,
            partitions=PARTS,
            parked_max=parked_max,
            hold_s=hold_s,
        )
        projector = Projector(
            self.store,
            self.log,
            self.published,
            applier,
            metrics=metrics,
            partitions=PARTS,
            gap_alert_ms=self.gap_alert_ms,
            namespace=namespace,
            group=group,
            pointer_ttl_s=0,
        )
        projector.assign((t, p) for t in TOPICS.run_topics for p in range(PARTS))
        return projector

    def write(self, events: Sequence[Event]) -> list[Record]:
        recs = []
        for e in events:
            run = e.run_id if isinstance(e, RunEvent | RunRequested) else "x"
            part = partition_for(run_key(run), PARTS)
            topic = TOPICS.for_role(type(e).topic_role) if isinstance(e, RunEvent) else TOPICS.steps
            recs.append(self.log.append(topic, part, CODEC.encode(e), run_key(run)))
        return recs

    def alerts(self) -> list[Alert]:
        return [e for e in self.published.events if isinstance(e, Alert)]

    def letters(self) -> list[DeadLettered]:
        return [e for e in self.published.events if isinstance(e, DeadLettered)]


def expected(events: list[RunEvent]) -> RunView:
    return fold(RunView(run_id=events[0].run_id), events).view


def by_topic_effects_first(records: list[Record]) -> list[Record]:
    order = {TOPICS.effects: 0, TOPICS.acceptance: 1, TOPICS.steps: 2}
    return sorted(records, key=lambda r: (order[r.topic], r.offset))


async def test_cross_topic_arrival_parks_then_applies_to_the_in_order_view() -> None:
    """Effects delivered before the steps they follow wait parked, then give the in-order view."""
    world = World()
    events = run_events("r1")
    recs = by_topic_effects_first(world.write(events))
    projector = world.projector()
    for rec in recs:
        await projector.process([rec])
    assert await world.store.load("r1") == expected(events)
    ns = await world.store.live_namespace()
    assert ns is not None
    assert await world.store.overdue_parked(ns, 2**50) == []
    assert await world.store.runs_by_status("succeeded") == ["r1"]


async def test_redelivered_records_change_nothing() -> None:
    """A batch delivered again (after a crash before the offset commit) is skipped."""
    world = World()
    events = run_events("r1")
    recs = world.write(events)
    projector = world.projector()
    await projector.process(recs)
    snapshot = await world.store.snapshot(await live(world))
    await world.projector().process(recs)
    await projector.process(recs)
    assert await world.store.snapshot(await live(world)) == snapshot


async def test_a_fresh_projector_fills_a_hole_before_its_first_delivery() -> None:
    """If delivery resumes past the stored progress, the records in between are read and applied."""
    world = World()
    events = run_events("r1", steps=3)
    recs = world.write(events)
    first = world.projector()
    await first.process([r for r in recs if r.offset < 3])
    later = world.projector()
    await later.process([r for r in recs if r.offset >= 6 or r.topic != TOPICS.steps])
    assert await world.store.load("r1") == expected(events)


async def test_undecodable_and_foreign_records_are_dead_lettered_and_the_rest_applied() -> None:
    """Poison bytes and a non-run event become dead letters naming topic, partition and offset."""
    world = World()
    events = run_events("r1", steps=1)
    part = partition_for(run_key("r1"), PARTS)
    poison = world.log.append(TOPICS.steps, part, b"\xc3\x01garbage", b"r1")
    foreign = world.write([RunRequested(run_id="r1", agent="a")])[0]
    recs = world.write(events)
    projector = world.projector()
    await projector.process([poison, foreign, *recs])
    letters = world.letters()
    assert [(d.source_topic, d.source_partition, d.source_offset) for d in letters] == [
        (TOPICS.steps, part, poison.offset),
        (TOPICS.steps, part, foreign.offset),
    ]
    assert "undecodable" in letters[0].reason
    assert letters[0].value == b"\xc3\x01garbage"
    assert "not a run event" in letters[1].reason
    assert await world.store.load("r1") == expected(events)
    ns = await live(world)
    assert (await world.store.read_progress(ns))[(TOPICS.steps, part)] == recs[-1].offset + 1


def _fork(inherited_json: str) -> RunForked:
    """Run r1's second event: a fork of run p at step 0 carrying ``inherited_json``."""
    return RunForked(
        run_id="r1", seq=2, fence=1, worker_id="w1", parent_run_id="p", from_step=0,
        generation=1, inherited_json=inherited_json,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("inherited_json", "reason"),
    [
        ("{not json", "inherited_json is not JSON"),
        ("[1]", "inherited_json is a JSON list, not an object"),
        ('{"steps": 5}', "not lists"),
        ('{"effects": [{"state": "landed"}]}', "is not valid"),
    ],
)
async def test_a_fork_whose_inheritance_the_fold_cannot_read_is_dead_lettered(
    inherited_json: str, reason: str
) -> None:
    """A RunForked whose inherited_json is not the worker's document becomes a dead letter saying
    why; the batch goes on (another run's events are applied, progress passes the record)."""
    world = World()
    started = run_events("r1", steps=1)[:1]
    other = run_events("r2", steps=1)
    recs = world.write(started)
    (bad,) = world.write([_fork(inherited_json)])
    recs += [bad, *world.write(other)]
    await world.projector().process(recs)
    (letter,) = world.letters()
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        bad.topic, bad.partition, bad.offset,
    )  # fmt: skip
    assert reason in letter.reason
    assert "RunForked of run r1 at seq 2" in letter.reason
    assert await world.store.load("r1") == expected(started)
    assert await world.store.load("r2") == expected(other)
    progress = await world.store.read_progress(await live(world))
    assert progress[(bad.topic, bad.partition)] > bad.offset


async def test_a_fork_with_a_readable_inheritance_is_applied() -> None:
    """A RunForked carrying no inheritance (null) is folded, not dead-lettered."""
    world = World()
    events = [*run_events("r1", steps=1)[:1], _fork("null")]
    await world.projector().process(world.write(events))
    assert world.letters() == []
    view = await world.store.load("r1")
    assert view is not None
    assert view.parent_run_id == "p"
    assert view == expected(events)


async def test_stale_fence_write_is_rejected_with_an_alert_naming_both_fences() -> None:
    """A zombie's event leaves the view as it was and raises fence.stale with run and worker."""
    world = World()
    events = run_events("r1", steps=1)[:-1]  # still running: a finished run takes no steps
    takeover = StepStarted(
        run_id="r1", seq=len(events) + 1, fence=2, worker_id="w2", step=1, step_name="x", attempt=1
    )
    zombie = StepStarted(
        run_id="r1", seq=len(events) + 2, fence=1, worker_id="w1", step=1, step_name="x", attempt=1
    )
    projector = world.projector()
    await projector.process(world.write([*events, takeover]))
    before = await world.store.load("r1")
    await projector.process(world.write([zombie]))
    assert await world.store.load("r1") == before
    (alert,) = world.alerts()
    assert alert.code == "fence.stale"
    assert alert.run_id == "r1"
    assert alert.worker_id == "w1"
    assert "stale fence 1" in alert.summary
    assert "fence 2" in alert.summary


async def test_quiet_partition_progress_reaches_the_log_end_over_markers() -> None:
    """tick() moves progress past trailing transaction markers so the resume barrier completes."""
    world = World()
    recs = world.write(run_events("r1", steps=1))
    for topic in TOPICS.run_topics:
        world.log.skip(topic, recs[0].partition)
    projector = world.projector()
    await projector.process(recs)
    ends = await world.log.end_offsets(list(projector.positions))
    barrier = [Position(t, p, o) for (t, p), o in ends.items()]
    assert not await world.store.progress(barrier)
    for _ in range(2):  # seen, then unchanged since: probed
        await projector.tick()
    assert await world.store.progress(barrier)


async def test_gap_that_stays_open_raises_one_alert() -> None:
    """Events parked past the timeout raise projector.gap once, not on every tick."""
    world = World(gap_alert_ms=0)
    events = run_events("r1", steps=1)
    projector = world.projector()
    await projector.process(world.write([events[0], events[2]]))
    await projector.tick()
    await projector.tick()
    (alert,) = world.alerts()
    assert alert.code == "projector.gap"
    assert alert.run_id == "r1"
    assert "seq 2" in alert.summary


async def test_two_projectors_racing_on_one_run_lose_no_update() -> None:
    """Concurrent writers of one run (a rebalance handover) converge through write conflicts."""
    world = World()
    events = run_events("r1", steps=3)
    recs = world.write(events)
    a, b = world.projector(), world.projector()
    await a.process(recs[:4])
    await b.process(recs[:8])
    await a.process(recs[4:12])
    await b.process(recs[8:])
    await a.process(recs[12:])
    assert await world.store.load("r1") == expected(events)


async def test_rebuild_into_a_new_namespace_then_swap_keeps_the_live_projectors_writes() -> None:
    """What the live projector applied after the rebuild captured its ends is replayed on swap."""
    world = World()
    events = run_events("r1", steps=3)
    recs = world.write(events)
    live_projector = world.projector()
    await live_projector.process(recs[:5])
    fresh = await world.store.create_namespace()
    rebuilder = world.projector(namespace=fresh)
    ends = {tp: end for tp, end in live_projector.positions.items()}
    await rebuilder.replay({tp: (0, end) for tp, end in ends.items()})
    await live_projector.process(recs[5:10])
    await world.store.swap(fresh)
    await live_projector.process(recs[10:])
    assert await world.store.load("r1") == expected(events)


async def test_index_is_repaired_when_a_redo_follows_a_crash_before_the_index_write() -> None:
    """A crash between the run write and the index+progress write is healed by the redo."""
    world = World()
    events = run_events("r1", steps=1)
    recs = world.write(events[:3])
    projector = world.projector()

    async def crash(namespace: str, updates: Sequence[IndexUpdate], progress: object) -> None:
        raise ConnectionError("redis went away")

    original = world.store.update_indexes
    world.store.update_indexes = crash  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await projector.process(recs)
    world.store.update_indexes = original  # type: ignore[method-assign]
    assert await world.store.runs_by_status("running") == []
    await world.projector().process(recs)
    assert await world.store.runs_by_status("running") == ["r1"]
    assert [i.idempotency_key for i in await world.store.open_intents()] == ["r1:0:pay:0"]


async def test_a_run_finished_longer_ago_than_retention_is_not_kept() -> None:
    """Retention: replaying a long-finished run stores nothing and indexes nothing."""
    world = World(retention_ms=1000)
    events = [e.model_copy(update={"occurred_at": 1}) for e in run_events("r1", steps=1)]
    await world.projector().process(world.write(events))
    assert await world.store.load("r1") is None
    assert await world.store.runs_by_status("succeeded") == []
    assert await world.store.runs_by_status("running") == []


async def live(world: World) -> str:
    ns = await world.store.live_namespace()
    assert ns is not None
    return ns


async def test_verify_compare_skips_runs_that_moved_on_and_reports_real_differences() -> None:
    """A run with events after the replay's end has moved on; a changed field is a difference."""
    world = World()
    events = run_events("r1", steps=2)
    other = run_events("r2", steps=1)
    recs = world.write([*events[:6], *other])
    live_projector = world.projector()
    await live_projector.process(recs)
    scratch = await world.store.create_namespace()
    await world.projector(namespace=scratch).replay(
        {tp: (0, end) for tp, end in live_projector.positions.items()}
    )
    await live_projector.process(world.write(events[6:]))
    ns = await live(world)
    result = compare(await world.store.snapshot(ns), await world.store.snapshot(scratch))
    assert result.moved_on == ["r1"]
    assert result.differences == []
    view = (await world.store.load_runs(ns, ["r2"]))["r2"]
    view.view.agent = "tampered"
    write = RunWrite(run_id="r2", expected=view.token, view=view.view)
    await world.store.write_runs(ns, [write])
    result = compare(await world.store.snapshot(ns), await world.store.snapshot(scratch))
    assert result.differences == ["{r2}:run [agent]: live=tampered rebuilt=a"]
