"""An operator's verdict on an effect: checked arguments, and the reconciler's plan it becomes."""

from __future__ import annotations

import pytest

from agentledger.errors import RunError
from agentledger.events.models import EffectReconciled, EffectRecorded, RunPaused
from agentledger.reconciler.decide import EFFECT_UNKNOWN_REASON, Resolution, plan_run
from agentledger.reconciler.resolve import Verdict, plan_resolve, verdict
from agentledger.views import fold
from tests.unit.test_reconciler_decide import run_view

LANDED = Verdict(landed=True, external_ref="pay_9", note="seen in the dashboard", by="ana")
NOT_LANDED = Verdict(landed=False, external_ref=None, note="", by="ana")


def test_landed_needs_a_ref() -> None:
    """--landed without --ref is refused, naming the missing option."""
    with pytest.raises(RunError, match="--landed needs --ref"):
        verdict("r", "k1", landed=True, external_ref=None, note="", by="ana")


def test_not_landed_takes_no_ref() -> None:
    """--not-landed with a --ref is refused: a reference would contradict the verdict."""
    with pytest.raises(RunError, match="takes no --ref"):
        verdict("r", "k1", landed=False, external_ref="pay_9", note="", by="ana")


def test_note_is_redacted() -> None:
    """A secret pasted into the note never reaches the event's detail."""
    secret = "sk_live_" + "a" * 24
    v = verdict("r", "k1", landed=True, external_ref="pay_9", note=f"key {secret}", by="ana")
    assert secret not in v.detail()
    assert "resolved by operator ana: landed as pay_9" in v.detail()


def test_landed_writes_the_reconcilers_event_as_the_operator() -> None:
    """LANDED: one EffectReconciled after the view's seq, under the fence, by operator:NAME."""
    view = run_view()
    plan = plan_resolve(view, "k1", LANDED, fence=7, now=5)
    [event] = plan.events
    assert isinstance(event, EffectReconciled)
    assert (event.seq, event.fence, event.worker_id) == (view.applied_seq + 1, 7, "operator:ana")
    assert (event.finding, event.external_ref) == ("LANDED", "pay_9")
    assert "seen in the dashboard" in event.detail
    effect = fold(view, plan.events).view.effects["k1"]
    assert (effect.state, effect.external_ref) == ("landed", "pay_9")


def test_not_landed_resumes_a_run_paused_for_the_effect_and_clears_its_alert() -> None:
    """NOT_LANDED on a run paused for the effect: the finding, a resume, the alert cleared."""
    unknown = plan_run(
        run_view(), [Resolution("k1", "UNKNOWN", detail="down")], fence=7, writer="rec", now=5
    )
    assert any(isinstance(e, RunPaused) for e in unknown.events)
    view = fold(run_view(), unknown.events).view
    assert view.pause is not None
    assert view.pause.reason == EFFECT_UNKNOWN_REASON
    plan = plan_resolve(view, "k1", NOT_LANDED, fence=8, now=6)
    [event] = plan.events
    assert isinstance(event, EffectReconciled)
    assert (event.finding, event.external_ref) == ("NOT_LANDED", None)
    assert [r.requested_by for r in plan.requests] == ["operator:ana"]
    assert "effect.unknown|r|k1||" in plan.clear
    assert fold(view, plan.events).view.effects["k1"].state == "not_landed"


def test_effect_by_name_is_found() -> None:
    """The effect can be named instead of keyed when the name is unambiguous."""
    plan = plan_resolve(run_view(), "e0", LANDED, fence=7, now=5)
    assert [e.idempotency_key for e in plan.events if isinstance(e, EffectReconciled)] == ["k1"]


def test_unknown_effect_is_refused() -> None:
    """A key the run does not have is refused, pointing at effects list."""
    with pytest.raises(RunError, match="no effect named or keyed 'nope'"):
        plan_resolve(run_view(), "nope", LANDED, fence=7, now=5)


def test_effect_with_an_outcome_is_refused() -> None:
    """An effect that already has an outcome is refused, saying which outcome."""
    done = EffectRecorded(
        run_id="r", seq=1, fence=1, worker_id="w", step=0, effect="e0",
        idempotency_key="k1", outcome="succeeded", external_ref="pay_1",
    )  # fmt: skip
    with pytest.raises(RunError, match="already has an outcome: succeeded as pay_1"):
        plan_resolve(run_view(done), "k1", NOT_LANDED, fence=7, now=5)
