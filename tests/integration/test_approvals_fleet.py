"""Approval gates on the fleet (invariant 8): a decision counts only for its run, generation,
intent and time, and is re-validated when the run resumes."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable

import pytest

from agentledger.bus.publisher import KafkaPublisher
from agentledger.events.models import now_ms
from agentledger.fleet import FleetSettings, decide_run, fork_run, request_resume, submit_run
from agentledger.fleet.examples import gated_refund, refund_intent
from agentledger.fleet.testing import alerts, fold_runs, running_worker, wait_until
from agentledger.fleet.wiring import operator
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.views import RunView
from agentledger.worker import intent_hash

pytestmark = pytest.mark.integration
WAIT_S = 90.0
HOUR_MS = 3_600_000


async def view_when(
    fleet: FleetSettings, run_id: str, ok: Callable[[RunView], bool], timeout_s: float = WAIT_S
) -> RunView:
    """The run's view folded from Kafka once ``ok`` holds (the last one seen otherwise)."""
    views = await wait_until(
        lambda: fold_runs(fleet), lambda v: run_id in v and ok(v[run_id]), timeout_s=timeout_s
    )
    assert run_id in views, f"run {run_id} never wrote an event"
    return views[run_id]


def waiting_for_approval(view: RunView) -> bool:
    """The run is paused on an approval gate."""
    return view.status == "paused" and view.pause is not None and view.pause.reason == "approval"


def ended(view: RunView) -> bool:
    """The run has finished, one way or another."""
    return view.status not in {"running", "paused", "new"}


async def payments(sandbox: SandboxProcess) -> Counter[str]:
    """How many payments the sandbox performed, per order."""
    async with SandboxClient(sandbox.url) as client:
        return Counter(str(e.payload["order_id"]) for e in await client.effects("payments"))


async def start_gated(fleet: FleetSettings, run_id: str, seed: int = 5) -> RunView:
    """Submit a gated refund run and return its view once it waits for approval."""
    async with KafkaPublisher(fleet) as publisher:
        await submit_run(publisher, "refund-gated", {"seed": seed}, run_id=run_id)
    view = await view_when(fleet, run_id, waiting_for_approval)
    assert waiting_for_approval(view)
    return view


async def test_an_approved_run_resumes_and_pays_once(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """``runs approve`` records the decision as lease holder and re-queues the run, which
    resumes and performs the approved payment exactly once."""
    run_id = f"{fleet.key_prefix}-ok"
    async with running_worker(fleet, gated_refund(fleet)):
        paused = await start_gated(fleet, run_id)
        async with operator(fleet, "alice") as op:
            decided = await decide_run(
                op.ledger, run_id, "approved", approver="alice",
                expires_at=now_ms() + HOUR_MS, barrier=op.barrier,
            )  # fmt: skip
        view = await view_when(fleet, run_id, ended)
    assert paused.pause is not None
    assert decided.intent_hash == paused.pause.intent_hash
    assert view.status == "succeeded"
    assert [(a.decision, a.approver, a.generation) for a in view.approvals] == [
        ("approved", "alice", 0)
    ]
    assert decided.fence > paused.fence  # written as the lease holder, above the pauser
    assert (await payments(sandbox))[f"ord-{run_id}"] == 1


async def test_a_rejected_run_ends_rejected_without_paying(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """``runs reject`` ends the run as rejected on its resume; nothing is paid."""
    run_id = f"{fleet.key_prefix}-no"
    async with running_worker(fleet, gated_refund(fleet)):
        await start_gated(fleet, run_id)
        async with operator(fleet, "bob") as op:
            await decide_run(op.ledger, run_id, "rejected", approver="bob", barrier=op.barrier)
        view = await view_when(fleet, run_id, ended)
    assert view.status == "rejected"
    assert "rejected by bob" in (view.error or "")
    assert not view.effects
    assert (await payments(sandbox))[f"ord-{run_id}"] == 0


async def test_an_approval_expired_before_the_resume_is_refused(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """An approval whose expiry passed before the run resumed is refused with an alert; the
    run stays paused and pays nothing."""
    run_id = f"{fleet.key_prefix}-late"
    async with running_worker(fleet, gated_refund(fleet)) as worker:
        await start_gated(fleet, run_id)
        expires_at = now_ms() + 1_000
        async with operator(fleet, "carol") as op:
            await decide_run(
                op.ledger, run_id, "approved", approver="carol", expires_at=expires_at,
                resume=False, barrier=op.barrier,
            )  # fmt: skip
        await asyncio.sleep(max(expires_at - now_ms(), 0) / 1000 + 0.2)
        async with KafkaPublisher(fleet) as publisher:
            await request_resume(publisher, run_id, reason="late")
        statuses = await wait_until(
            lambda: asyncio.sleep(0, [o.status for r, o in worker.history if r == run_id]),
            lambda found: len(found) >= 2,
            timeout_s=WAIT_S,
        )
        assert statuses == ["paused", "refused"]
    view = (await fold_runs(fleet))[run_id]
    assert waiting_for_approval(view)
    codes = [a.code for a in await alerts(fleet) if a.run_id == run_id]
    assert "approval.expired" in codes
    assert (await payments(sandbox))[f"ord-{run_id}"] == 0


async def test_an_approval_of_another_intent_is_refused(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """An approval recorded for another intent (replayed from elsewhere) does not approve what
    the run asks: the resume refuses it, alerts, and pays nothing."""
    run_id = f"{fleet.key_prefix}-replay"
    foreign = intent_hash(refund_intent(5, f"{fleet.key_prefix}-someone-else"))
    async with running_worker(fleet, gated_refund(fleet)) as worker:
        paused = await start_gated(fleet, run_id)
        assert paused.pause is not None
        assert foreign != paused.pause.intent_hash
        async with operator(fleet, "mallory") as op:
            await decide_run(
                op.ledger, run_id, "approved", approver="mallory", intent_hash=foreign,
                expires_at=now_ms() + HOUR_MS, barrier=op.barrier,
            )  # fmt: skip
        statuses = await wait_until(
            lambda: asyncio.sleep(0, [o.status for r, o in worker.history if r == run_id]),
            lambda found: len(found) >= 2,
            timeout_s=WAIT_S,
        )
        assert statuses == ["paused", "refused"]
    view = (await fold_runs(fleet))[run_id]
    assert waiting_for_approval(view)
    codes = [a.code for a in await alerts(fleet) if a.run_id == run_id]
    assert "approval.other_intent" in codes
    assert (await payments(sandbox))[f"ord-{run_id}"] == 0


async def test_a_fork_of_an_approved_run_must_be_approved_again(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """A fork (new generation) does not inherit its parent's approval: it pauses at the same
    gate, pays nothing until approved itself, then pays once; the parent paid once."""
    parent = f"{fleet.key_prefix}-parent"
    child = f"{fleet.key_prefix}-child"
    async with running_worker(fleet, gated_refund(fleet)):
        await start_gated(fleet, parent)
        async with operator(fleet, "alice") as op:
            await decide_run(
                op.ledger, parent, "approved", approver="alice",
                expires_at=now_ms() + HOUR_MS, barrier=op.barrier,
            )  # fmt: skip
            assert (await view_when(fleet, parent, ended)).status == "succeeded"
            forked = await fork_run(op.ledger, parent, 1, run_id=child, barrier=op.barrier)
            assert forked.generation == 1
            gated = await view_when(fleet, child, waiting_for_approval)
            assert waiting_for_approval(gated)
            assert gated.approvals == []
            assert (await payments(sandbox))[f"ord-{parent}"] == 1  # the parent's only
            await decide_run(
                op.ledger, child, "approved", approver="alice",
                expires_at=now_ms() + HOUR_MS, barrier=op.barrier,
            )  # fmt: skip
        view = await view_when(fleet, child, ended)
    assert view.status == "succeeded"
    assert [(a.generation, a.decision) for a in view.approvals] == [(1, "approved")]
    # the fork refunds the parent's order (its fetch_order is inherited): a second payment,
    # under the fork's own idempotency key, approved for generation 1
    paid = await payments(sandbox)
    assert paid[f"ord-{parent}"] == 2
    mine = {e.idempotency_key for e in view.effects.values() if e.kind == "payments"}
    theirs = {e.idempotency_key for e in (await fold_runs(fleet))[parent].effects.values()}
    assert len(mine) == 1
    assert mine.isdisjoint(theirs)
