"""Forks on the fleet: a new generation from a checkpoint, re-running only the steps after it."""

from __future__ import annotations

import pytest

from agentledger.bus.publisher import KafkaPublisher
from agentledger.demo.agent import expected_effects
from agentledger.errors import RunError
from agentledger.events.models import StepStarted
from agentledger.fleet import FleetSettings, fork_run, submit_run
from agentledger.fleet.examples import gated_refund, refund
from agentledger.fleet.testing import fold_runs, run_events, running_worker, wait_until
from agentledger.fleet.wiring import operator
from agentledger.providers.sandbox.process import SandboxProcess
from tests.integration.fleet_support import finished, performed

pytestmark = pytest.mark.integration
WAIT_S = 90.0
FORK_AT = 2  # refund_agent's "refund" step: its payment is inherited, email and ticket re-run


async def test_a_fork_reruns_only_the_steps_after_its_checkpoint(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """Forking a finished run at step k gives a new generation that inherits steps 0..k with
    their results and effects (external references kept), starts only steps after k, and
    sends no effect the parent sent up to k."""
    agent = refund(fleet)
    parent, child = f"{fleet.key_prefix}-p", f"{fleet.key_prefix}-c"
    seed = next(s for s in range(50) if _refunds(s, parent))
    async with running_worker(fleet, agent):
        async with KafkaPublisher(fleet) as publisher:
            await submit_run(publisher, agent.name, {"seed": seed}, run_id=parent)
        views = await wait_until(lambda: fold_runs(fleet), finished([parent]), timeout_s=WAIT_S)
        async with operator(fleet, "tester") as op:
            await fork_run(op.ledger, parent, FORK_AT, run_id=child, barrier=op.barrier)
        views = await wait_until(lambda: fold_runs(fleet), finished([child]), timeout_s=WAIT_S)
    before = await performed(sandbox)
    mother, fork = views[parent], views[child]
    assert mother.status == "succeeded"
    assert fork.status == "succeeded"
    assert (fork.parent_run_id, fork.forked_from_step, fork.generation) == (parent, FORK_AT, 1)
    started = sorted(e.step for e in (await run_events(fleet))[child] if isinstance(e, StepStarted))
    assert started == list(range(FORK_AT + 1, len(fork.plan)))
    for index in range(FORK_AT + 1):
        assert fork.steps[index].inherited
        assert fork.steps[index].result_json == mother.steps[index].result_json
    inherited = {k: e for k, e in fork.effects.items() if e.inherited}
    early = {k: e for k, e in mother.effects.items() if e.step <= FORK_AT}
    assert set(inherited) == set(early)
    assert early, "the parent must have emitted an effect up to the fork point"
    assert all(inherited[k].external_ref == early[k].external_ref for k in early)
    assert all(before[k] == 1 for k in early)  # sent once, by the parent only
    new = {k for k, e in fork.effects.items() if not e.inherited}
    assert {fork.effects[k].step for k in new} == {3, 4}
    assert all(before[k] == 1 for k in new)
    assert new.isdisjoint(mother.effects)


async def test_a_fork_needs_checkpointed_steps_up_to_its_point(fleet: FleetSettings) -> None:
    """A fork cannot start from a step that is not checkpointed (here: paused at its gate)."""
    run_id = f"{fleet.key_prefix}-gate"
    async with running_worker(fleet, gated_refund(fleet)):
        async with KafkaPublisher(fleet) as publisher:
            await submit_run(publisher, "refund-gated", {"seed": 2}, run_id=run_id)
        await wait_until(
            lambda: fold_runs(fleet),
            lambda v: run_id in v and v[run_id].status == "paused",
            timeout_s=WAIT_S,
        )
        async with operator(fleet, "tester") as op:
            with pytest.raises(RunError, match="step 2 is started, not checkpointed"):
                await fork_run(op.ledger, run_id, 2, barrier=op.barrier)
            fork = await fork_run(op.ledger, run_id, 1, resume=False, barrier=op.barrier)
    assert fork.cursor == 2
    assert fork.status == "running"


def _refunds(seed: int, run_id: str) -> bool:
    return "payments" in expected_effects(seed, run_id)
