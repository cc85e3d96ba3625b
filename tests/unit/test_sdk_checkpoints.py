"""Checkpoints that ride with the next commit, and new runs opened from the run index."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger.demo.agent import refund_agent, spec_for
from agentledger.events import EffectReconciled
from agentledger.providers.protocol import EffectRequest
from agentledger.testing import LedgerEnvironment, SimulatedCrash
from agentledger.worker import RunSpec, Step

PLAN = ("a", "b", "c")


def spec(plan: tuple[str, ...] = PLAN) -> RunSpec:
    """A run spec for run ``r1``."""
    return RunSpec(run_id="r1", agent="t", plan=plan)


async def effect_body(step: Step) -> Any:
    """One effect per step, keyed by the step."""
    request = EffectRequest(kind="emails", identity={"step": step.index}, free_text={"b": "x"})
    done = await step.effect("notify", request)
    return {"step": step.index, "replayed": done.replayed}


async def walk(env: LedgerEnvironment, **kw: Any) -> list[Any]:
    """Run every step of PLAN with one effect each; the values returned."""
    async with env.ledger(checkpoints="with_next_commit", **kw).run(spec()) as run:
        return [await run.step(name, effect_body) for name in PLAN]


async def test_an_effect_step_pays_one_commit_that_carries_the_previous_checkpoint() -> None:
    """With with_next_commit, each effect step commits once (its intent with the previous
    step's checkpoint), the finish once more; the log ends as with each_step."""
    async with LedgerEnvironment() as env:
        await walk(env)
        assert len(env.log.batches) == len(PLAN) + 1
        second = env.log.batch_types()[1]
        assert second.index("StepCheckpointed") < second.index("EffectIntended")
        deferred = await env.view("r1")
    async with LedgerEnvironment() as env:
        async with env.ledger().run(spec()) as run:
            for name in PLAN:
                await run.step(name, effect_body)
        assert len(env.log.batches) == 2 * len(PLAN) + 1
        each = await env.view("r1")
    assert {k: s.result_json for k, s in deferred.steps.items()} == {
        k: s.result_json for k, s in each.steps.items()
    }
    assert deferred.status == each.status == "succeeded"


@pytest.mark.parametrize("hit", [1, 2, 3])
async def test_a_crash_with_the_checkpoint_queued_continues_the_step_without_resending(
    hit: int,
) -> None:
    """A crash after a step returned but before its checkpoint committed resumes that step:
    its intent is looked up (LANDED), the effect is never sent twice, the run ends the same."""
    async with LedgerEnvironment() as env:
        with pytest.raises(SimulatedCrash):
            await walk(env, kill_switch=env.crash_switch("checkpoint_pending", hit))
        env.expire_leases()
        values = await walk(env)
        assert [v["step"] for v in values] == [0, 1, 2]
        assert values[hit - 1]["replayed"] is True
        assert len(env.provider.effects) == len(PLAN)
        findings = [e.finding for e in await env.events("r1") if isinstance(e, EffectReconciled)]
        assert findings == ["LANDED"]
        assert (await env.view("r1")).status == "succeeded"


async def test_an_exception_between_steps_commits_the_queued_checkpoint() -> None:
    """An ordinary exception leaving the run commits what is queued: the steps that returned
    are not run again when the run is reopened."""
    async with LedgerEnvironment() as env:

        async def fail_after_one_step() -> None:
            async with env.ledger(checkpoints="with_next_commit").run(spec()) as run:
                await run.step("a", effect_body)
                raise RuntimeError("the agent failed between steps")

        with pytest.raises(RuntimeError):
            await fail_after_one_step()
        assert (await env.view("r1")).cursor == 1
        values = await walk(env)
        assert values[0] == {"step": 0, "replayed": False}
        assert len(env.provider.effects) == len(PLAN)


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_the_demo_agent_with_queued_checkpoints_survives_a_crash_at_every_hit(
    seed: int,
) -> None:
    """The refund agent killed at each hit of checkpoint_pending, Redis flushed, resumed
    cold: same step results, same cost, every effect exactly once."""
    async with LedgerEnvironment() as ref_env:
        switch = ref_env.crash_switch("checkpoint_pending", 10_000)
        async with ref_env.ledger(checkpoints="with_next_commit", kill_switch=switch).run(
            spec_for("d", seed)
        ) as run:
            await refund_agent(run, seed)
        hits = switch.counts["checkpoint_pending"]
        ref = await ref_env.view("d")
    assert hits > 0
    for hit in range(1, hits + 1):
        async with LedgerEnvironment() as env:
            with pytest.raises(SimulatedCrash):
                async with env.ledger(
                    checkpoints="with_next_commit",
                    kill_switch=env.crash_switch("checkpoint_pending", hit),
                ).run(spec_for("d", seed)) as run:
                    await refund_agent(run, seed)
            env.flush_redis()
            async with env.ledger(checkpoints="with_next_commit").run(spec_for("d", seed)) as run:
                await refund_agent(run, seed)
            view = await env.view("d")
            assert view.status == ref.status
            assert (view.budget.tokens, view.budget.usd) == (ref.budget.tokens, ref.budget.usd)
            assert {k: s.result_json for k, s in view.steps.items()} == {
                k: s.result_json for k, s in ref.steps.items()
            }
            assert sorted(e.idempotency_key for e in env.provider.effects) == sorted(
                e.idempotency_key for e in ref_env.provider.effects
            )


async def test_a_new_run_opens_from_the_index_without_reading_the_log() -> None:
    """Once the index is vouched for (the log was empty), new runs read nothing from the log;
    a known run is read back (resumed, not restarted)."""
    async with LedgerEnvironment() as env:
        async with env.ledger(run_index=True).run(spec(("a",))) as run:
            assert run.resumed_from == "new"
            await run.step("a", effect_body)
        reads = env.log.reads
        async with env.ledger(run_index=True).run(RunSpec(run_id="r2", agent="t", plan=("a",))):
            pass
        assert env.log.reads == reads
        async with env.ledger(run_index=True).run(spec(("a",))) as run:
            assert run.status == "succeeded"
        assert env.log.reads > reads


async def test_after_a_wipe_the_index_is_not_trusted_and_runs_resume_from_the_log() -> None:
    """After FLUSHALL a run that was started is still resumed (the log is read), and the
    written log is never vouched for."""
    async with LedgerEnvironment() as env:
        with pytest.raises(SimulatedCrash):
            async with env.ledger(
                run_index=True, kill_switch=env.crash_switch("after_checkpoint")
            ).run(spec()) as run:
                await run.step("a", effect_body)
        env.flush_redis()
        async with env.ledger(run_index=True).run(spec()) as run:
            assert run.resumed_from == "log"
            assert run.view.cursor == 1
        reads = env.log.reads
        async with env.ledger(run_index=True).run(RunSpec(run_id="r3", agent="t", plan=("a",))):
            pass
        assert env.log.reads > reads


async def test_sync_commits_the_queued_checkpoint_at_once() -> None:
    """Run.sync makes the steps that returned durable before the next commit would."""
    async with LedgerEnvironment() as env:

        async def crash_in_the_second_step() -> None:
            async with env.ledger(
                checkpoints="with_next_commit", kill_switch=env.crash_switch("step", 2)
            ).run(spec()) as run:
                await run.step("a", effect_body)
                await run.sync()
                await run.step("b", effect_body)

        with pytest.raises(SimulatedCrash):
            await crash_in_the_second_step()
        assert (await env.view("r1")).cursor == 1
