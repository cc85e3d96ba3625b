"""The fold's admission rules and event semantics, one behaviour per test."""

from __future__ import annotations

import json

from agentledger.events import (
    ActivityRecorded,
    EffectIntended,
    EffectReconciled,
    RunForked,
    RunStarted,
    StepCheckpointed,
    StepRejected,
    StepStarted,
)
from agentledger.views import Admission, RunView, admit, fold

RUN = "r"


def env(seq: int, fence: int = 1) -> dict[str, object]:
    return {"run_id": RUN, "seq": seq, "fence": fence, "worker_id": f"w{fence}"}


def started(seq: int = 1, fence: int = 1) -> RunStarted:
    return RunStarted(**env(seq, fence), agent="a", plan=["a", "b", "c"])  # type: ignore[arg-type]


def step(seq: int, index: int, fence: int = 1, attempt: int = 1) -> StepStarted:
    return StepStarted(**env(seq, fence), step=index, step_name="x", attempt=attempt)  # type: ignore[arg-type]


def test_event_ahead_of_a_gap_is_parked_until_the_gap_closes() -> None:
    """seq 3 before seq 2 is parked, then applied once seq 2 arrives in a later fold."""
    first = fold(RunView(run_id=RUN), [started(), step(3, 1)])
    assert [e.seq for e in first.parked] == [3]
    assert first.view.applied_seq == 1
    second = fold(first.view, [*first.parked, step(2, 0)])
    assert second.view.applied_seq == 3
    assert not second.parked


def test_lower_fence_after_a_takeover_is_rejected_as_stale() -> None:
    """A zombie (fence 1) writing after fence 2 took over is STALE and changes nothing."""
    view = fold(RunView(run_id=RUN), [started(), step(2, 0, fence=2)]).view
    zombie = step(3, 0, fence=1)
    assert admit(view, zombie) is Admission.STALE
    result = fold(view, [zombie])
    assert result.stale == [zombie]
    assert result.view == view


def test_zombie_write_at_a_position_the_new_fence_owns_is_stale_not_duplicate() -> None:
    """A zombie re-using a seq the new writer already wrote is flagged, not silently skipped."""
    view = fold(RunView(run_id=RUN), [started(), step(2, 0, fence=2)]).view
    assert admit(view, step(2, 1, fence=1)) is Admission.STALE


def test_redelivery_of_an_old_fence_event_is_a_duplicate() -> None:
    """An event from before the takeover, delivered again, is a harmless duplicate."""
    view = fold(RunView(run_id=RUN), [started(), step(2, 0, fence=2)]).view
    assert admit(view, started()) is Admission.DUPLICATE


def test_takeover_racing_a_zombie_write_is_a_conflict() -> None:
    """A higher fence at an already-applied seq means the new writer must re-claim."""
    view = fold(RunView(run_id=RUN), [started(), step(2, 0)]).view
    assert admit(view, step(2, 0, fence=2)) is Admission.CONFLICT


def test_activities_of_a_crashed_attempt_stay_reusable_when_it_restarts() -> None:
    """StepStarted again with the same attempt keeps that attempt's recorded activities."""
    act = ActivityRecorded(**env(3), step=0, attempt=1, ordinal=0, name="llm", result_json='"x"')  # type: ignore[arg-type]
    view = fold(RunView(run_id=RUN), [started(), step(2, 0), act, step(4, 0)]).view
    assert view.steps[0].activities[0].result_json == '"x"'


def test_a_new_attempt_starts_with_no_recorded_activities() -> None:
    """After a rejection, attempt 2 does not reuse attempt 1's activity results."""
    act = ActivityRecorded(**env(3), step=0, attempt=1, ordinal=0, name="llm")  # type: ignore[arg-type]
    rej = StepRejected(**env(4), step=0, step_name="x", attempt=1, reason="bad")  # type: ignore[arg-type]
    view = fold(RunView(run_id=RUN), [started(), step(2, 0), act, rej, step(5, 0, attempt=2)]).view
    assert view.steps[0].activities == {}
    assert view.budget.consecutive_errors == 1


def test_cursor_moves_only_on_checkpoint() -> None:
    """A rejected step keeps the cursor; a checkpointed one advances it."""
    rej = StepRejected(**env(3), step=0, step_name="x", attempt=1, reason="bad")  # type: ignore[arg-type]
    view = fold(RunView(run_id=RUN), [started(), step(2, 0), rej]).view
    assert view.cursor == 0
    ok = StepCheckpointed(**env(4), step=0, step_name="x", attempt=1)  # type: ignore[arg-type]
    assert fold(view, [ok]).view.cursor == 1


def test_reconciled_landed_records_the_external_reference() -> None:
    """EffectReconciled LANDED closes an open intent with the provider's id."""
    intent = EffectIntended(
        **env(2),
        step=0,
        ordinal=0,
        effect="pay",
        provider="p",
        kind="payments",  # type: ignore[arg-type]
        idempotency_key="k",
        identity_hash="i",
        payload_hash="p",
    )
    view = fold(RunView(run_id=RUN), [started(), intent]).view
    assert [e.idempotency_key for e in view.open_effects()] == ["k"]
    found = EffectReconciled(
        **env(3),
        step=0,
        effect="pay",
        idempotency_key="k",
        finding="LANDED",
        external_ref="x1",  # type: ignore[arg-type]
    )
    view = fold(view, [found]).view
    assert view.effects["k"].state == "landed"
    assert view.effects["k"].external_ref == "x1"
    assert view.open_effects() == []


def test_fork_inherits_parent_steps_and_effects_as_done() -> None:
    """RunForked brings the parent's checkpointed steps and effects; the cursor follows."""
    inherited = {
        "steps": [{"step": 0, "name": "a", "status": "checkpointed", "result_json": "1"}],
        "effects": [
            {
                "idempotency_key": "k",
                "step": 0,
                "ordinal": 0,
                "effect": "pay",
                "provider": "p",
                "kind": "payments",
                "identity_hash": "i",
                "payload_hash": "p",
                "state": "succeeded",
            }
        ],
    }
    forked = RunForked(
        **env(2),
        parent_run_id="parent",
        from_step=0,
        generation=1,  # type: ignore[arg-type]
        inherited_json=json.dumps(inherited),
    )
    view = fold(RunView(run_id=RUN), [started(), forked]).view
    assert view.cursor == 1
    assert view.generation == 1
    assert view.effects["k"].inherited
    assert view.steps[0].inherited
