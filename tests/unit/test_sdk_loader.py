"""Loading a run's view: the projector's view, completed from the log where it is behind."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from agentledger._core.loader import fold_log, load_view
from agentledger.bus.memory import MemoryEventLog
from agentledger.errors import RunError, RunLogCorruptError
from agentledger.events import RecordSkipped, RunEvent, RunForked
from agentledger.views import RunView, fold
from agentledger.views.memory_store import MemoryViewStore
from agentledger.views.store import RunWrite

from .test_fold_into_store import run_events

RUN = "r-load"


class SinceLog(MemoryEventLog):
    """The in-memory log, remembering from where each read of a run started."""

    def __init__(self) -> None:
        super().__init__(run_partitions=2)
        self.reads: list[dict[tuple[str, int], int]] = []

    async def read_run(
        self, run_id: str, *, since: Mapping[tuple[str, int], int] | None = None
    ) -> list[RunEvent]:
        """Read, noting ``since`` (empty: from the beginning)."""
        self.reads.append(dict(since or {}))
        return await super().read_run(run_id, since=since)


async def project_until_now(
    log: MemoryEventLog, store: MemoryViewStore, events: list[RunEvent]
) -> None:
    """What a projector leaves after applying ``events`` (all the log holds): view + progress."""
    namespace = await store.live_namespace(create=True)
    assert namespace is not None
    done = fold(RunView(run_id=RUN), events)
    write = RunWrite(RUN, None, done.view, steps=done.touched_steps, effects=done.touched_effects)
    await store.write_runs(namespace, [write])
    ends = await log.run_end_positions(RUN)
    await store.record_progress(namespace, {(p.topic, p.partition): p.offset for p in ends})


async def test_a_caught_up_projector_is_read_alone() -> None:
    """When the projector has applied the whole run, its view is the answer and the log is not
    read."""
    log, store = SinceLog(), MemoryViewStore()
    events = run_events(RUN, steps=2)
    await log.publish(events)
    await project_until_now(log, store, events)
    loaded = await load_view(log, RUN, reader=store)
    assert loaded.source == "views"
    assert loaded.view.applied_seq == len(events)
    assert log.reads == []


async def test_a_view_behind_the_log_is_completed_from_the_projectors_offsets() -> None:
    """A projector that has not applied the last commits gives its view plus only the events
    after its offsets, folded on top: the same view as folding the whole run."""
    log, store = SinceLog(), MemoryViewStore()
    events = run_events(RUN, steps=3)
    first, rest = events[:7], events[7:]
    await log.publish(first)
    await project_until_now(log, store, first)
    progress_before = {(p.topic, p.partition): p.offset for p in await log.run_end_positions(RUN)}
    await log.publish(rest)
    loaded = await load_view(log, RUN, reader=store)
    assert loaded.source == "views+log"
    assert log.reads == [progress_before]
    assert loaded.view == await fold_log(log, RUN)
    assert loaded.view.applied_seq == len(events)


async def test_a_new_run_with_a_busy_projector_is_empty_without_waiting() -> None:
    """A run nobody wrote yet, on partitions the projector is behind on, opens as new at once."""
    log, store = SinceLog(), MemoryViewStore()
    other = run_events(RUN, steps=1)
    await log.publish(other)
    await store.live_namespace(create=True)  # a projector that has applied nothing yet
    loaded = await load_view(log, "r-new", reader=store)
    assert loaded.view.status == "new"
    assert loaded.source == "views+log"


async def test_without_a_projector_the_whole_run_is_folded() -> None:
    """No live namespace (no projector ever ran, or Redis was wiped): the run is read whole."""
    log, store = SinceLog(), MemoryViewStore()
    events = run_events(RUN, steps=2)
    await log.publish(events)
    loaded = await load_view(log, RUN, reader=store)
    assert loaded.source == "log"
    assert log.reads == [{}]
    assert loaded.view.applied_seq == len(events)


async def test_a_view_with_parked_events_is_completed_with_them_and_the_tail() -> None:
    """An event the projector parked (its topic applied, an earlier event of another topic not
    yet) lies before the tail of its partition, so it is taken from the view's parked events."""
    log, store = SinceLog(), MemoryViewStore()
    events = run_events(RUN, steps=2)
    await log.publish(events)
    effects = log.topics.effects
    parked = next(e for e in events if e.seq > 2 and log.topics.for_event(e) == effects)
    namespace = await store.live_namespace(create=True)
    assert namespace is not None
    done = fold(RunView(run_id=RUN), events[:2])
    write = RunWrite(
        RUN, None, done.view, steps=done.touched_steps, parked=[parked], parked_changed=True
    )
    await store.write_runs(namespace, [write])
    ends = await log.run_end_positions(RUN)
    # Only the part of the effects partition up to the parked event is applied.
    applied = {(p.topic, p.partition): 0 for p in ends}
    (tp,) = [k for k in applied if k[0] == effects]
    applied[tp] = next(
        r.offset + 1
        for r in log.records(effects, tp[1])
        if log.codec.decode(r.value or b"") == parked
    )
    await store.record_progress(namespace, applied)
    loaded = await load_view(log, RUN, reader=store)
    assert loaded.source == "views+log"
    assert log.reads == [applied]
    assert loaded.view == await fold_log(log, RUN)


async def test_a_gap_in_the_log_itself_fails_as_the_whole_fold_does() -> None:
    """When the log lacks an event (records lost), the completed view still has a gap: the load
    fails naming it, as folding the whole run does, instead of resuming past it."""
    log, store = SinceLog(), MemoryViewStore()
    events = run_events(RUN, steps=2)
    await log.publish([e for e in events if e.seq != 3])
    await store.live_namespace(create=True)
    with pytest.raises(RunError, match="gap after seq 2"):
        await load_view(log, RUN, reader=store)


async def test_a_view_that_dropped_parked_events_is_never_used_alone() -> None:
    """A view the projector marked as missing events dropped over its parked cap is not resumed
    from, though its progress covers the run: the whole run is folded from the log."""
    log, store = SinceLog(), MemoryViewStore()
    events = run_events(RUN, steps=2)
    await log.publish(events)
    namespace = await store.live_namespace(create=True)
    assert namespace is not None
    done = fold(RunView(run_id=RUN), events[:3])
    write = RunWrite(RUN, None, done.view, steps=done.touched_steps, dropped_from=4)
    await store.write_runs(namespace, [write])
    ends = await log.run_end_positions(RUN)
    await store.record_progress(namespace, {(p.topic, p.partition): p.offset for p in ends})
    loaded = await load_view(log, RUN, reader=store)
    assert loaded.source == "log"
    assert loaded.view == fold(RunView(run_id=RUN), events).view
    assert log.reads == [{}]


@pytest.mark.parametrize("inherited_json", ["{not json", '{"steps": [{"step": "x"}]}'])
async def test_a_fork_the_fold_cannot_read_is_a_corrupt_log_naming_its_position(
    inherited_json: str,
) -> None:
    """A RunForked whose inherited_json is not the worker's document makes the worker's own fold
    fail as an undecodable record does (RunLogCorruptError naming the record), not with the
    fold's DecodeError; a RecordSkipped naming it makes the run readable without it."""
    log = MemoryEventLog(run_partitions=2)
    started = run_events(RUN, steps=1)[:1]
    fork = RunForked(
        run_id=RUN, seq=2, fence=1, worker_id="w1", parent_run_id="p", from_step=0,
        generation=1, inherited_json=inherited_json,
    )  # fmt: skip
    await log.publish([*started, fork])
    (end,) = [p for p in await log.run_end_positions(RUN) if p.topic == log.topics.steps]
    with pytest.raises(RunLogCorruptError) as err:
        await fold_log(log, RUN)
    (bad,) = err.value.errors
    assert (bad.topic, bad.partition, bad.offset) == (end.topic, end.partition, end.offset - 1)
    assert f"RunForked of run {RUN} at seq 2: inherited_json" in bad.reason
    with pytest.raises(RunLogCorruptError):
        await load_view(log, RUN)
    skip = RecordSkipped(
        run_id=RUN, source_topic=bad.topic, source_partition=bad.partition,
        source_offset=bad.offset, reason="ops",
    )  # fmt: skip
    await log.publish([skip])
    assert await fold_log(log, RUN) == fold(RunView(run_id=RUN), started).view
