"""Crash and resume on the in-memory ports: every effect once, every cost counted once."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger.demo.agent import refund_agent, spec_for
from agentledger.errors import (
    BudgetExceededError,
    EffectUnknownError,
    IdentityMismatchError,
    ReplayMismatchError,
    VersionDriftError,
)
from agentledger.events import Alert, EffectReconciled, PlanRevised, RunResumed
from agentledger.providers.faults import FaultRule
from agentledger.providers.hashing import EffectHasher
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest, ProviderResult
from agentledger.testing import LedgerEnvironment, SimulatedCrash
from agentledger.views import Versions
from agentledger.worker import Limits, Metered, RunSpec, Step

REQUEST = EffectRequest(
    kind="payments", identity={"order": "o1", "amount": 100}, free_text={"memo": "first"}
)


def spec(plan: tuple[str, ...] = ("pay",), **kw: Any) -> RunSpec:
    """A run spec for run ``r1``."""
    return RunSpec(run_id="r1", agent="t", plan=plan, **kw)


async def pay_body(step: Step, request: EffectRequest = REQUEST) -> Any:
    """One payment effect; the result says whether it was replayed from the record."""
    done = await step.effect("charge", request)
    return {"replayed": done.replayed}


async def crash_then_resume(
    env: LedgerEnvironment, point: str, body: Any = pay_body, **kw: Any
) -> Any:
    """Run ``body`` as step ``pay`` until the crash at ``point``; resume in a new worker."""
    with pytest.raises(SimulatedCrash):
        async with env.ledger(kill_switch=env.crash_switch(point)).run(spec(**kw)) as run:
            await run.step("pay", body)
    env.expire_leases()
    async with env.ledger().run(spec(**kw)) as run:
        return await run.step("pay", body)


async def test_provider_committed_but_outcome_lost_is_found_by_lookup() -> None:
    """Crash after the provider committed: lookup finds it, no second call, one effect."""
    async with LedgerEnvironment() as env:
        result = await crash_then_resume(env, "after_provider_commit")
        assert result == {"replayed": True}
        assert len(env.provider.effects) == 1
        assert sum(env.provider.lookups.values()) == 1
        findings = [e.finding for e in await env.events("r1") if isinstance(e, EffectReconciled)]
        assert findings == ["LANDED"]


async def test_provider_that_never_got_the_call_is_sent_once_with_the_same_key() -> None:
    """Intent durable, call never made: lookup finds nothing, exactly one send, same key."""
    async with LedgerEnvironment() as env:
        calls: list[str] = []

        class DiesOnFirstCall(MemoryProvider):
            async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
                calls.append(key)
                if len(calls) == 1:
                    raise SimulatedCrash("before_provider", "r1")
                return await super().perform(request, key)

        env.providers["sandbox"] = provider = DiesOnFirstCall(name="sandbox")
        env.expire_leases()
        with pytest.raises(SimulatedCrash):
            async with env.ledger().run(spec()) as run:
                await run.step("pay", pay_body)
        env.expire_leases()
        async with env.ledger().run(spec()) as run:
            assert await run.step("pay", pay_body) == {"replayed": False}
        assert len(provider.effects) == 1
        assert calls[0] == calls[1]
        findings = [e.finding for e in await env.events("r1") if isinstance(e, EffectReconciled)]
        assert findings == ["NOT_LANDED"]


async def test_unreachable_provider_on_resume_pauses_and_sends_nothing() -> None:
    """Lookup impossible during resume: run paused (effect_unknown) with an alert, no send."""
    async with LedgerEnvironment() as env:
        with pytest.raises(SimulatedCrash):
            async with env.ledger(kill_switch=env.crash_switch("after_provider_commit")).run(
                spec()
            ) as run:
                await run.step("pay", pay_body)
        env.provider.set_faults(FaultRule(mode="down"))
        env.expire_leases()
        with pytest.raises(EffectUnknownError, match="paused for reconciliation"):
            async with env.ledger().run(spec()) as run:
                pytest.fail("the run must not open while an intent is unknowable")
        view = await env.view("r1")
        assert view.status == "paused"
        assert view.pause is not None
        assert view.pause.reason == "effect_unknown"
        assert [a.code for a in env.alerts() if isinstance(a, Alert)] == ["effect.unknown"]
        assert len(env.provider.effects) == 1  # only the original, nothing re-sent
        env.provider.clear_faults()
        env.expire_leases()
        async with env.ledger().run(spec()) as run:
            assert await run.step("pay", pay_body) == {"replayed": True}
        assert len(env.provider.effects) == 1


async def test_provider_timeout_records_unknown_and_pauses_never_retries() -> None:
    """A dropped answer is recorded as unknown; the run pauses; resume finds it by lookup."""
    async with LedgerEnvironment() as env:
        env.provider.set_faults(FaultRule(mode="drop-after-commit", times=1))
        with pytest.raises(EffectUnknownError):
            async with env.ledger().run(spec()) as run:
                await run.step("pay", pay_body)
        view = await env.view("r1")
        assert view.status == "paused"
        assert next(iter(view.effects.values())).state == "unknown"
        async with env.ledger().run(spec()) as run:
            assert await run.step("pay", pay_body) == {"replayed": True}
        assert len(env.provider.effects) == 1
        assert (await env.view("r1")).status == "succeeded"


async def test_retry_with_other_identity_stops_with_both_hashes() -> None:
    """Same key, different identity fields: IdentityMismatchError naming both hashes, alert."""
    async with LedgerEnvironment() as env:
        with pytest.raises(SimulatedCrash):
            async with env.ledger(kill_switch=env.crash_switch("before_checkpoint")).run(
                spec()
            ) as run:
                await run.step("pay", pay_body)
        env.expire_leases()
        changed = EffectRequest(kind="payments", identity={"order": "o1", "amount": 999})
        with pytest.raises(IdentityMismatchError) as caught:
            async with env.ledger().run(spec()) as run:
                await run.step("pay", lambda s: pay_body(s, changed))
        keyed = EffectHasher()  # the log's hashes are keyed (the environment's default key)
        assert caught.value.recorded_hash == keyed.identity(REQUEST.identity)
        assert caught.value.new_hash == keyed.identity(changed.identity)
        assert keyed.identity(REQUEST.identity) in str(caught.value)
        assert keyed.identity(changed.identity) in str(caught.value)
        view = await env.view("r1")
        assert view.status == "paused"
        assert view.pause is not None
        assert view.pause.reason == "identity_mismatch"
        assert "effect.identity_mismatch" in [a.code for a in env.alerts() if isinstance(a, Alert)]
        assert len(env.provider.effects) == 1  # nothing was sent for the changed retry


async def test_free_text_only_difference_returns_the_recorded_outcome() -> None:
    """Only free text changed on retry: the recorded outcome comes back, nothing is sent."""
    async with LedgerEnvironment() as env:
        with pytest.raises(SimulatedCrash):
            async with env.ledger(kill_switch=env.crash_switch("before_checkpoint")).run(
                spec()
            ) as run:
                await run.step("pay", pay_body)
        env.expire_leases()
        reworded = REQUEST.model_copy(update={"free_text": {"memo": "second wording"}})
        async with env.ledger().run(spec()) as run:
            assert await run.step("pay", lambda s: pay_body(s, reworded)) == {"replayed": True}
        assert len(env.provider.effects) == 1
        assert env.provider.effects[0].payload["memo"] == "first"


async def test_version_drift_is_refused_by_default_with_the_diff() -> None:
    """Resuming under another model version is refused and the message names the change."""
    async with LedgerEnvironment() as env:
        old = Versions(code="c1", model="m1")
        with pytest.raises(SimulatedCrash):
            async with env.ledger(kill_switch=env.crash_switch("after_provider_commit")).run(
                spec(versions=old)
            ) as run:
                await run.step("pay", pay_body)
        env.expire_leases()
        new = Versions(code="c1", model="m2")
        with pytest.raises(VersionDriftError, match="model 'm1' -> 'm2'"):
            async with env.ledger().run(spec(versions=new)):
                pytest.fail("refused runs do not open")
        assert [e for e in await env.events("r1") if isinstance(e, RunResumed)] == []
        assert "run.version_drift" in [a.code for a in env.alerts() if isinstance(a, Alert)]


@pytest.mark.parametrize("policy", ["continue", "replan"])
async def test_version_drift_with_a_permissive_policy_is_recorded(policy: str) -> None:
    """continue/replan resume under the new versions and write it down (never silent)."""
    async with LedgerEnvironment() as env:
        with pytest.raises(SimulatedCrash):
            async with env.ledger(kill_switch=env.crash_switch("after_provider_commit")).run(
                spec(versions=Versions(code="c1"), version_policy=policy)
            ) as run:
                await run.step("pay", pay_body)
        env.expire_leases()
        async with env.ledger().run(spec(versions=Versions(code="c2"))) as run:
            await run.step("pay", pay_body)
        events = await env.events("r1")
        resumed = [e for e in events if isinstance(e, RunResumed)]
        assert [r.policy_applied for r in resumed] == [policy]
        assert any(isinstance(e, PlanRevised) for e in events) == (policy == "replan")
        assert (await env.view("r1")).versions.code == "c2"


async def test_budget_spent_before_a_crash_counts_after_resume() -> None:
    """Tokens recorded by a crashed process are in the budget the next process enforces."""
    async with LedgerEnvironment() as env:
        limits = Limits(tokens=250)
        plan = ("think", "think_more", "think_again")

        async def think(step: Step) -> Any:
            return await step.activity("llm", lambda: _metered(100))

        async def walk(ledger: Any) -> None:
            async with ledger.run(spec(plan=plan, limits=limits)) as run:
                await run.step("think", think)
                await run.step("think_more", think)  # on resume: reused, no new tokens
                await run.step("think_again", think)

        with pytest.raises(SimulatedCrash):
            await walk(env.ledger(kill_switch=env.crash_switch("before_checkpoint", 2)))
        env.expire_leases()
        with pytest.raises(BudgetExceededError, match="tokens budget exceeded: spent 300 of 250"):
            await walk(env.ledger())
        view = await env.view("r1")
        assert view.status == "budget_exceeded"
        assert view.budget.tokens == 300


async def _metered(tokens: int) -> Metered[str]:
    return Metered("thought", tokens=tokens, usd=tokens / 1000)


async def test_crash_mid_activity_reruns_it_once_and_counts_it_once() -> None:
    """An activity killed before it was recorded runs again; its cost is recorded once."""
    async with LedgerEnvironment() as env:
        calls: list[int] = []

        async def think(step: Step) -> Any:
            async def llm() -> Metered[str]:
                calls.append(1)
                return await _metered(50)

            return await step.activity("llm", llm)

        with pytest.raises(SimulatedCrash):
            async with env.ledger(kill_switch=env.crash_switch("mid_activity")).run(
                spec(plan=("think",))
            ) as run:
                await run.step("think", think)
        env.expire_leases()
        async with env.ledger().run(spec(plan=("think",))) as run:
            assert await run.step("think", think) == "thought"
        assert len(calls) == 2
        assert (await env.view("r1")).budget.tokens == 50


async def test_crash_before_checkpoint_reuses_activity_and_effect() -> None:
    """Acceptance passed, checkpoint lost: the same attempt continues, nothing runs twice."""
    async with LedgerEnvironment() as env:
        calls: list[int] = []

        async def body(step: Step) -> Any:
            async def llm() -> Metered[str]:
                calls.append(1)
                return await _metered(10)

            await step.activity("llm", llm)
            return await pay_body(step)

        result = await crash_then_resume(env, "before_checkpoint", body)
        assert result == {"replayed": True}
        assert len(calls) == 1
        assert len(env.provider.effects) == 1
        view = await env.view("r1")
        assert view.steps[0].attempt == 1
        assert view.budget.tokens == 10


async def test_resumed_step_asking_for_another_activity_fails_with_both_names() -> None:
    """Replay check: activity 0 recorded as 'llm', asked as 'search' -> ReplayMismatchError."""
    async with LedgerEnvironment() as env:

        async def body(step: Step) -> Any:
            return await step.activity("llm", lambda: _metered(1))

        async def other(step: Step) -> Any:
            return await step.activity("search", lambda: _metered(1))

        with pytest.raises(SimulatedCrash):
            async with env.ledger(kill_switch=env.crash_switch("before_checkpoint")).run(
                spec(plan=("think",))
            ) as run:
                await run.step("think", body)
        env.expire_leases()
        with pytest.raises(ReplayMismatchError, match=r"'llm'.*'search'"):
            async with env.ledger().run(spec(plan=("think",))) as run:
                await run.step("think", other)


async def test_wiped_lease_store_still_gives_a_higher_fence() -> None:
    """After FLUSHALL the resumed writer's fence is above every fence in the log (floor)."""
    async with LedgerEnvironment() as env:
        with pytest.raises(SimulatedCrash):
            async with env.ledger(kill_switch=env.crash_switch("after_provider_commit")).run(
                spec()
            ) as run:
                await run.step("pay", pay_body)
        env.flush_redis()
        async with env.ledger().run(spec()) as run:
            await run.step("pay", pay_body)
        fences = [e.fence for e in await env.events("r1")]
        assert fences == sorted(fences)
        assert fences[-1] == 2


@pytest.mark.parametrize(
    "point",
    ["step", "mid_activity", "after_provider_commit", "before_checkpoint", "after_checkpoint"],
)
@pytest.mark.parametrize("hit", [1, 2, 3])
async def test_demo_agent_survives_a_crash_anywhere(point: str, hit: int) -> None:
    """Crash at any kill point, resume cold: same result, same cost, effects exactly once."""
    async with LedgerEnvironment() as ref_env:
        async with ref_env.ledger().run(spec_for("d", 3)) as run:
            expected = await refund_agent(run, 3)
        ref = await ref_env.view("d")
    async with LedgerEnvironment() as env:
        try:
            async with env.ledger(kill_switch=env.crash_switch(point, hit)).run(
                spec_for("d", 3)
            ) as run:
                await refund_agent(run, 3)
        except SimulatedCrash:
            pass
        env.flush_redis()
        async with env.ledger().run(spec_for("d", 3)) as run:
            assert await refund_agent(run, 3) == expected
        view = await env.view("d")
        assert view.status == "succeeded"
        assert (view.budget.tokens, view.budget.usd) == (ref.budget.tokens, ref.budget.usd)
        assert {k: s.result_json for k, s in view.steps.items()} == {
            k: s.result_json for k, s in ref.steps.items()
        }
        assert sorted(e.idempotency_key for e in env.provider.effects) == sorted(
            e.idempotency_key for e in ref_env.provider.effects
        )
