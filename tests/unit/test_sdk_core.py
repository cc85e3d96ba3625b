"""The SDK's pure decisions: budgets, version policy, approval validation, replay checks."""

from __future__ import annotations

import pytest

from agentledger._core import budget, versions
from agentledger._core.replay import check_activity, check_effect, check_step, effect_index
from agentledger.errors import ReplayMismatchError
from agentledger.views import (
    ActivityView,
    Approval,
    Budget,
    EffectView,
    RunView,
    StepView,
    Versions,
)
from agentledger.worker import approvals

NOW = 1_700_000_000_000


# --- budgets ----------------------------------------------------------------------------------


def test_attempt_refused_once_steps_are_spent() -> None:
    """max_steps counts attempts from events; the next attempt is refused at the limit."""
    assert budget.before_attempt(Budget(max_steps=3, steps=2), NOW) is None
    overrun = budget.before_attempt(Budget(max_steps=3, steps=3), NOW)
    assert overrun is not None
    assert overrun.limit == "steps"
    assert "steps budget exceeded: spent 3 of 3" in overrun.describe()


def test_consecutive_errors_and_deadline_stop_attempts() -> None:
    """Too many rejections in a row, or a passed deadline, refuse the next attempt."""
    errors = budget.before_attempt(Budget(max_consecutive_errors=2, consecutive_errors=2), NOW)
    assert errors is not None
    assert errors.limit == "consecutive_errors"
    late = budget.before_attempt(Budget(deadline_at=NOW - 1), NOW)
    assert late is not None
    assert late.limit == "deadline"


def test_spending_is_refused_at_the_limit_and_flagged_above_it() -> None:
    """No new spend once a limit is reached; a spend that crossed it is reported after."""
    assert budget.before_spending(Budget(max_tokens=100, tokens=99), NOW) is None
    assert budget.before_spending(Budget(max_tokens=100, tokens=100), NOW) is not None
    assert budget.after_spending(Budget(max_tokens=100, tokens=100)) is None
    crossed = budget.after_spending(Budget(max_usd=1.0, usd=1.5))
    assert crossed is not None
    assert crossed.limit == "usd"


def test_unlimited_budget_never_overruns() -> None:
    """None limits mean unlimited."""
    spent = Budget(tokens=10**9, usd=1e6, steps=10**6, consecutive_errors=99)
    assert budget.before_attempt(spent, NOW) is None
    assert budget.after_spending(spent) is None


# --- versions ---------------------------------------------------------------------------------


def test_version_drift_names_every_change() -> None:
    """The refusal says which versions changed, from what to what."""
    decision = versions.decide(
        Versions(code="c1", prompt="p1", model="m1"),
        Versions(code="c2", prompt="p1", model="m2"),
        "refuse",
    )
    assert decision.refused
    assert versions.describe(decision.changes) == "code 'c1' -> 'c2', model 'm1' -> 'm2'"


@pytest.mark.parametrize("policy", ["refuse", "continue", "replan"])
def test_same_versions_need_no_policy(policy: str) -> None:
    """Without drift every policy resumes silently (policy "")."""
    decision = versions.decide(Versions(code="c"), Versions(code="c"), policy)
    assert decision.policy == ""
    assert not decision.refused


@pytest.mark.parametrize("policy", ["continue", "replan"])
def test_declared_policy_is_applied_on_drift(policy: str) -> None:
    """continue and replan resume under the new versions, and say so."""
    decision = versions.decide(Versions(code="c1"), Versions(code="c2"), policy)
    assert decision.policy == policy
    assert not decision.refused


def test_unknown_policy_is_an_error() -> None:
    """A typo in the policy is not silently treated as refuse or continue."""
    with pytest.raises(ValueError, match="refuse, continue, replan"):
        versions.decide(Versions(), Versions(code="x"), "ignore")


# --- approvals --------------------------------------------------------------------------------


def _approval(
    decision: str = "approved",
    *,
    approval_id: str = "a1",
    generation: int = 0,
    intent: str = "h1",
    expires_at: int | None = None,
) -> Approval:
    return Approval(
        approval_id=approval_id,
        decision=decision,
        approver="alice",
        generation=generation,
        intent_hash=intent,
        expires_at=expires_at,
    )


def _validate(items: list[Approval], **kw: object) -> approvals.ApprovalVerdict:
    params: dict[str, object] = {"generation": 0, "intent_hash": "h1", "now": NOW, **kw}
    return approvals.validate(items, **params)  # type: ignore[arg-type]


def test_valid_approval_is_usable() -> None:
    """Approved, unexpired, this generation and intent: usable."""
    verdict = _validate([_approval(expires_at=NOW + 1)])
    assert verdict.usable
    assert verdict.approval is not None


def test_expired_approval_is_refused() -> None:
    """An approval past its expiry is refused and says when it expired."""
    verdict = _validate([_approval(expires_at=NOW - 1)])
    assert verdict.status == "expired"
    assert not verdict.usable


def test_revocation_voids_an_earlier_approval() -> None:
    """The latest decision of an approval id wins: revoked after approved is refused."""
    verdict = _validate([_approval(), _approval("revoked")])
    assert verdict.status == "revoked"


def test_approval_of_another_generation_cannot_be_resurrected() -> None:
    """After a fork or restore (new generation) an older approval is never used."""
    verdict = _validate([_approval(generation=0)], generation=1)
    assert verdict.status == "other_generation"
    assert "generation 0" in verdict.reason


def test_approval_replayed_onto_another_intent_is_refused() -> None:
    """An approval of intent h1 does not approve intent h2."""
    verdict = _validate([_approval(intent="h1")], intent_hash="h2")
    assert verdict.status == "other_intent"


def test_rejection_and_pending() -> None:
    """A rejection is final for the intent; no decision at all is pending."""
    assert _validate([_approval("rejected")]).status == "rejected"
    assert _validate([]).status == "pending"
    assert _validate([], asked_expires_at=NOW - 1).status == "expired"


# --- replay -----------------------------------------------------------------------------------


def _view() -> RunView:
    view = RunView(run_id="r", plan=["fetch", "refund"], plan_version=1)
    view.steps[0] = StepView(step=0, name="fetch", status="started", attempt=1, attempts=1)
    view.steps[0].activities[0] = ActivityView(ordinal=0, name="load", kind="read")
    view.effects["k"] = EffectView(
        idempotency_key="k",
        step=1,
        ordinal=0,
        effect="refund",
        provider="p",
        kind="payments",
        identity_hash="i",
        payload_hash="p",
    )
    return view


def test_replayed_step_with_another_name_names_both() -> None:
    """A resumed run asking for another step at a recorded place fails with both names."""
    with pytest.raises(ReplayMismatchError, match=r"'fetch'.*'charge'"):
        check_step(_view(), 0, "charge")


def test_step_must_follow_the_plan() -> None:
    """A step not in the plan at its index, or beyond the plan, is refused."""
    with pytest.raises(ReplayMismatchError, match="plan names step 1 'refund'"):
        check_step(_view(), 1, "email")
    with pytest.raises(ReplayMismatchError, match="beyond the plan"):
        check_step(_view(), 2, "ticket")
    check_step(_view(), 1, "refund")


def test_replayed_activity_and_effect_with_other_names_fail() -> None:
    """Activity and effect N must keep their recorded names; both names are in the error."""
    view = _view()
    with pytest.raises(ReplayMismatchError, match=r"'load'.*'fetch_order'"):
        check_activity("r", view.steps[0], 0, "fetch_order")
    check_activity("r", view.steps[0], 1, "anything_new")
    recorded = view.effects[effect_index(view)[(1, 0)]]
    with pytest.raises(ReplayMismatchError, match=r"'refund'.*'charge'"):
        check_effect("r", recorded, 0, "charge")
    check_effect("r", recorded, 0, "refund")
