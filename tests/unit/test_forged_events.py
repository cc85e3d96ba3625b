"""Forged and misplaced events change nothing and are reported (issue 17, finding 11)."""

from __future__ import annotations

import pytest

from agentledger._core.keys import MAX_RUN_ID, check_run_id
from agentledger.bus.memory import MemoryEventLog
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.errors import RunError
from agentledger.events import EffectReconciled, RunEvent, StepCheckpointed
from agentledger.fleet.submit import submit_run
from agentledger.testing import LedgerEnvironment
from agentledger.views import Admission, admit, fold
from agentledger.worker import RunSpec

from .test_fold_into_store import CODEC, PARTS, TOPICS, World, expected, run_events


def finished(run: str = "r1") -> list[RunEvent]:
    """A one-step run that succeeded (fence 1)."""
    return run_events(run, steps=1)


def forged_checkpoint(events: list[RunEvent], *, ahead: int = 1) -> StepCheckpointed:
    """A valid StepCheckpointed rewriting step 0, past the end of ``events`` with a higher fence."""
    return StepCheckpointed(
        run_id=events[0].run_id,
        seq=events[-1].seq + ahead,
        fence=9,
        worker_id="mallory",
        step=0,
        step_name="s0",
        attempt=1,
        result_json='"forged"',
    )


def test_a_finished_run_refuses_a_forged_checkpoint_past_its_end() -> None:
    """The forged event of the issue is CLOSED: step 0's result and the run's fence stay."""
    events = finished()
    view = expected(events)
    result = fold(view, [forged_checkpoint(events)])
    assert len(result.closed) == 1
    assert result.view == view
    assert result.view.steps[0].result_json != '"forged"'
    assert result.view.fence == 1


def test_a_forged_event_ahead_of_a_gap_in_a_finished_run_is_refused_not_parked() -> None:
    """An event that could never be applied is not parked (it would raise false gap alerts)."""
    events = finished()
    result = fold(expected(events), [forged_checkpoint(events, ahead=5)])
    assert len(result.closed) == 1
    assert result.parked == []


def test_a_finished_run_still_takes_the_reconcilers_finding_on_its_effects() -> None:
    """EffectReconciled after RunFinished (the reconciler's lease: a higher fence) is applied."""
    events = finished()
    finding = EffectReconciled(
        run_id="r1",
        seq=events[-1].seq + 1,
        fence=2,
        worker_id="reconciler",
        step=0,
        effect="pay",
        idempotency_key="r1:0:pay:0",
        finding="LANDED",
        external_ref="pay_1",
    )
    result = fold(expected(events), [finding])
    assert result.applied == [finding]
    assert result.view.effects["r1:0:pay:0"].state == "landed"


def test_a_different_event_at_an_applied_seq_is_divergent_and_a_redelivery_is_not() -> None:
    """Same seq and fence with other content is DIVERGENT; the same event again is DUPLICATE."""
    events = run_events("r1", steps=1)[:-1]
    view = expected(events)
    original = events[-1]
    assert isinstance(original, StepCheckpointed)
    other = original.model_copy(update={"result_json": '"other"', "event_id": "e-other"})
    assert admit(view, other) is Admission.DIVERGENT
    assert admit(view, original) is Admission.DUPLICATE
    result = fold(view, [other])
    assert result.divergent == [other]
    assert result.view == view


async def test_the_projector_alerts_on_an_event_after_finish_and_leaves_the_view() -> None:
    """The forged record of the issue raises run.event_after_finish; the view stays as it was."""
    world = World()
    events = finished()
    projector = world.projector()
    await projector.process(world.write(events))
    before = await world.store.load("r1")
    await projector.process(world.write([forged_checkpoint(events)]))
    assert await world.store.load("r1") == before
    (alert,) = world.alerts()
    assert alert.code == "run.event_after_finish"
    assert alert.worker_id == "mallory"
    assert "succeeded" in alert.summary


async def test_the_projector_alerts_on_a_divergent_duplicate_but_not_on_a_redelivery() -> None:
    """A second, different event at an applied seq raises run.seq_divergent; a redelivery does
    not raise anything."""
    world = World()
    events = run_events("r1", steps=1)[:-1]
    projector = world.projector()
    await projector.process(world.write(events))
    await projector.process(world.write([events[-1]]))
    assert world.alerts() == []
    other = events[-1].model_copy(update={"result_json": '"other"', "event_id": "e-other"})
    await projector.process(world.write([other]))
    (alert,) = world.alerts()
    assert alert.code == "run.seq_divergent"
    assert await world.store.load("r1") == expected(events)


async def test_a_record_on_the_wrong_partition_for_its_key_is_dead_lettered() -> None:
    """An event whose record is on another partition than its key's is dead-lettered with where
    it was and why, and the view is what the run's own partition says."""
    world = World()
    events = run_events("r1", steps=1)[:-1]
    projector = world.projector()
    await projector.process(world.write(events))
    home = partition_for(run_key("r1"), PARTS)
    stray = forged_checkpoint(events).model_copy(update={"fence": 1, "worker_id": "w1"})
    rec = world.log.append(TOPICS.steps, 1 - home, CODEC.encode(stray), run_key("r1"))
    await projector.process([rec])
    assert await world.store.load("r1") == expected(events)
    (letter,) = world.letters()
    assert (letter.source_partition, letter.source_offset) == (1 - home, rec.offset)
    assert f"belongs on partition {home}" in letter.reason


async def test_a_record_keyed_for_another_run_is_dead_lettered_and_ignored_by_the_sdk() -> None:
    """A record under run r1's key whose event names r2 is dead-lettered by the projector and is
    not an event of either run when the SDK folds r1 from the log."""
    world = World()
    stray = run_events("r2", steps=1)[0]
    part = partition_for(run_key("r1"), PARTS)
    rec = world.log.append(TOPICS.steps, part, CODEC.encode(stray), run_key("r1"))
    await world.projector().process([rec])
    (letter,) = world.letters()
    assert "keyed by their run id" in letter.reason
    assert await world.store.load("r2") is None
    log = MemoryEventLog(TOPICS, run_partitions=PARTS)
    log.append_raw(TOPICS.steps, run_key("r1"), CODEC.encode(stray))
    assert await log.read_run("r1") == []


@pytest.mark.parametrize(
    "run_id", ["", "has space", "a\nb", "x" * (MAX_RUN_ID + 1), "-lead", "{t}"]
)
def test_run_ids_outside_the_limits_are_refused_with_a_clear_error(run_id: str) -> None:
    """A run id that is empty, too long, or has spaces, control or other characters is refused."""
    with pytest.raises(RunError, match=f"1-{MAX_RUN_ID} characters"):
        check_run_id(run_id)


def test_run_ids_within_the_limits_pass() -> None:
    """Ids such as the demo's, a fork's and a LangGraph thread's pass unchanged."""
    for run_id in [
        "ord-demo-20261130-182409-dc88-000",
        "r1.fork-1a2b3c4d",
        "lg:t-1",
        "x" * MAX_RUN_ID,
    ]:
        assert check_run_id(run_id) == run_id


async def test_the_sdk_refuses_a_bad_run_id_before_writing_anything() -> None:
    """Opening a run or submitting one with a bad id raises RunError and writes no record."""
    async with LedgerEnvironment() as env:
        with pytest.raises(RunError, match="run id"):
            async with env.ledger().run(RunSpec(run_id="a b", agent="t", plan=("a",))):
                pass
        with pytest.raises(RunError, match="run id"):
            await submit_run(env.memory_log, "t", run_id="x" * 10_000)
        log = env.memory_log
        assert not any(log.records(topic) for topic in log.topics.run_topics)
        assert not log.records(log.topics.requests)
