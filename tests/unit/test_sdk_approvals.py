"""Approval gates: a paused run goes ahead only on a valid approval of its intent (invariant 8)."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger.errors import ApprovalError, RunPausedError
from agentledger.events import Alert
from agentledger.providers.protocol import EffectRequest
from agentledger.testing import LedgerEnvironment
from agentledger.worker import RunSpec, Step, intent_hash

REFUND = EffectRequest(kind="payments", identity={"order": "o1", "amount_cents": 90_000})
SPEC = RunSpec(run_id="r1", agent="t", plan=("big_refund",))


async def gated(step: Step) -> Any:
    """Ask for approval of the refund's identity, then perform it."""
    await step.approval(dict(REFUND.identity), ask="refund 900.00?", approver="finance")
    return (await step.effect("refund", REFUND)).external_ref is not None


async def walk(env: LedgerEnvironment) -> Any:
    """Open the run in a new worker and take the gated step."""
    async with env.ledger().run(SPEC) as run:
        return await run.step("big_refund", gated)


async def pause_for_approval(env: LedgerEnvironment) -> None:
    """Run until the gate pauses the run."""
    with pytest.raises(RunPausedError, match="waiting for approval"):
        await walk(env)
    view = await env.view("r1")
    assert view.status == "paused"
    assert view.pause is not None
    assert view.pause.intent_hash == intent_hash(dict(REFUND.identity))


async def test_approve_resumes_and_performs_the_effect_once() -> None:
    """Approval recorded: the resumed run performs the approved effect exactly once."""
    async with LedgerEnvironment() as env:
        await pause_for_approval(env)
        assert env.provider.effects == []
        await env.ledger().decide("r1", "approved", approver="alice")
        assert await walk(env) is True
        assert len(env.provider.effects) == 1
        assert (await env.view("r1")).status == "succeeded"


async def test_reject_ends_the_run_as_rejected() -> None:
    """A rejection finishes the run as rejected; nothing is performed."""
    async with LedgerEnvironment() as env:
        await pause_for_approval(env)
        await env.ledger().decide("r1", "rejected", approver="bob", note="too much")
        with pytest.raises(ApprovalError, match="rejected"):
            await walk(env)
        assert (await env.view("r1")).status == "rejected"
        assert env.provider.effects == []


async def test_expired_approval_is_refused_with_an_alert() -> None:
    """An approval that expired before the resume is refused; the run stays paused."""
    async with LedgerEnvironment() as env:
        await pause_for_approval(env)
        await env.ledger().decide("r1", "approved", approver="a", expires_at=env.clock() + 1000)
        env.clock.advance(5000)
        with pytest.raises(ApprovalError, match="expired"):
            await walk(env)
        assert (await env.view("r1")).status == "paused"
        assert "approval.expired" in [a.code for a in env.alerts() if isinstance(a, Alert)]
        assert env.provider.effects == []


async def test_approval_of_another_intent_is_refused() -> None:
    """An approval issued for another intent cannot be replayed onto this one."""
    async with LedgerEnvironment() as env:
        await pause_for_approval(env)
        await env.ledger().decide("r1", "approved", approver="a", intent_hash="f" * 64)
        with pytest.raises(ApprovalError, match=r"approves intent f{64}, not"):
            await walk(env)
        assert (await env.view("r1")).status == "paused"
        assert "approval.other_intent" in [a.code for a in env.alerts() if isinstance(a, Alert)]
        assert env.provider.effects == []


async def test_still_pending_approval_does_not_take_the_run() -> None:
    """Resuming a run that still waits writes nothing and raises RunPausedError."""
    async with LedgerEnvironment() as env:
        await pause_for_approval(env)
        before = len(await env.events("r1"))
        with pytest.raises(RunPausedError):
            await walk(env)
        assert len(await env.events("r1")) == before


async def test_a_second_decision_on_a_standing_one_is_refused() -> None:
    """Approve, approve again, then reject: the second and third are refused, one is recorded."""
    async with LedgerEnvironment() as env:
        await pause_for_approval(env)
        await env.ledger().decide("r1", "approved", approver="alice")
        with pytest.raises(ApprovalError, match="already approved by alice"):
            await env.ledger().decide("r1", "approved", approver="alice")
        with pytest.raises(ApprovalError, match="already approved by alice"):
            await env.ledger().decide("r1", "rejected", approver="bob")
        assert [a.decision for a in (await env.view("r1")).approvals] == ["approved"]
        assert await walk(env) is True
        assert len(env.provider.effects) == 1


async def test_a_revoked_or_expired_decision_can_be_replaced() -> None:
    """After a revoke (or once an approval expired) a new decision is recorded."""
    async with LedgerEnvironment() as env:
        await pause_for_approval(env)
        await env.ledger().decide("r1", "approved", approver="a", expires_at=env.clock() + 1000)
        env.clock.advance(5000)
        await env.ledger().decide("r1", "approved", approver="b")
        await env.ledger().decide("r1", "revoked", approver="b")
        await env.ledger().decide("r1", "rejected", approver="c")
        decisions = [a.decision for a in (await env.view("r1")).approvals]
        assert decisions == ["approved", "approved", "revoked", "rejected"]
