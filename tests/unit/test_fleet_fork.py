"""Forks on the in-memory ports: what is inherited, what is refused, what the fork re-runs."""

from __future__ import annotations

import pytest

from agentledger.demo.agent import expected_effects, refund_agent, spec_for
from agentledger.errors import ApprovalError, RunError, RunPausedError
from agentledger.events.models import StepStarted
from agentledger.fleet import fork_run, inherited_of
from agentledger.fleet.commands import parse_duration_s
from agentledger.fleet.listing import pending_approval, render_show, run_detail
from agentledger.testing import LedgerEnvironment
from agentledger.worker import RunSpec, Step

SEED = next(s for s in range(50) if "payments" in expected_effects(s, "p"))


async def finished_parent(env: LedgerEnvironment) -> None:
    """Run the demo refund agent as run ``p`` to the end."""
    async with env.ledger().run(spec_for("p", SEED)) as run:
        await refund_agent(run, SEED)


async def test_a_fork_inherits_steps_and_effects_and_reruns_only_later_steps() -> None:
    """The fork starts at step k+1 in generation 1 and never sends the parent's effects up to
    k again; the steps after k run (and send) anew under the fork's keys."""
    async with LedgerEnvironment() as env:
        await finished_parent(env)
        parent = await env.view("p")
        fork = await fork_run(env.ledger(), "p", 2, run_id="f", resume=False)
        assert (fork.cursor, fork.generation, fork.parent_run_id) == (3, 1, "p")
        sent_before = len(env.provider.effects)
        async with env.ledger().run(spec_for("f", SEED)) as run:
            await refund_agent(run, SEED)
        view = await env.view("f")
        assert view.status == "succeeded"
        started = [e.step for e in await env.events("f") if isinstance(e, StepStarted)]
        assert started == [3, 4]
        inherited = {k for k, e in view.effects.items() if e.inherited}
        assert inherited == {k for k, e in parent.effects.items() if e.step <= 2}
        assert len(env.provider.effects) == sent_before + 2  # email and ticket only
        assert all(
            view.effects[k].external_ref == parent.effects[k].external_ref for k in inherited
        )


async def test_a_fork_must_start_from_checkpointed_steps() -> None:
    """Forking past the last checkpoint, beyond the plan, or below zero is refused."""
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec_for("p", SEED)) as run:
            await run.step("fetch_order", _order)
        parent = await env.view("p")
        with pytest.raises(RunError, match="step 1 is not run"):
            inherited_of(parent, 1)
        with pytest.raises(RunError, match="beyond the plan"):
            inherited_of(parent, 9)
        with pytest.raises(RunError, match="0 or more"):
            inherited_of(parent, -1)
        assert [s["step"] for s in inherited_of(parent, 0)["steps"]] == [0]


async def test_a_fork_needs_a_fresh_run_id() -> None:
    """A fork never writes into a run that already has events."""
    async with LedgerEnvironment() as env:
        await finished_parent(env)
        with pytest.raises(RunError, match="already exists"):
            await fork_run(env.ledger(), "p", 1, run_id="p")


GATE = RunSpec(run_id="g", agent="t", plan=("ask", "pay"))


async def _ask(step: Step) -> str:
    return "asked"


async def _pay(step: Step) -> str:
    await step.approval({"pay": 10}, ask="pay 10?")
    return "paid"


async def walk_gate(env: LedgerEnvironment, run_id: str) -> None:
    """Open ``run_id`` (the gated plan) and walk both steps."""
    async with env.ledger().run(RunSpec(run_id=run_id, agent="t", plan=GATE.plan)) as run:
        await run.step("ask", _ask)
        await run.step("pay", _pay)


async def test_a_forks_approvals_start_empty_and_its_generation_is_new() -> None:
    """An approved parent's fork pauses at the same gate again: approvals are not inherited."""
    async with LedgerEnvironment() as env:
        with pytest.raises(RunPausedError):
            await walk_gate(env, "g")
        await env.ledger().decide("g", "approved", approver="alice")
        await walk_gate(env, "g")
        fork = await fork_run(env.ledger(), "g", 0, run_id="g2", resume=False)
        assert fork.approvals == []
        with pytest.raises(RunPausedError):
            await walk_gate(env, "g2")
        view = await env.view("g2")
        approval = pending_approval(view)
        assert approval is not None
        assert approval["ask"] == "pay 10?"
        assert "approval   waiting" in render_show(run_detail(view, None, "log"))
        with pytest.raises(ApprovalError, match="waits for no approval"):
            await env.ledger().decide("p-none", "approved", approver="x")


def test_durations_read_like_people_write_them() -> None:
    """``--expires-in`` accepts seconds and the ms, s, m, h, d units, and refuses the rest."""
    assert parse_duration_s("90") == 90
    assert parse_duration_s("15m") == 900
    assert parse_duration_s("1.5h") == 5400
    assert parse_duration_s("500ms") == 0.5
    with pytest.raises(Exception, match="duration"):
        parse_duration_s("soon")


async def _order(step: Step) -> dict[str, str]:
    return {"order_id": "ord-p"}
