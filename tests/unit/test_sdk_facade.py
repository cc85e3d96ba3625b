"""The decorator SDK on in-memory ports: agents, steps, activities and effects as functions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from structlog.testing import capture_logs

import agentledger
from agentledger import Check, EffectRequest, Metered, RunSpec, Step
from agentledger.errors import ConfigurationError, LeaseHeldError, ReplayMismatchError, UsageError
from agentledger.events import EffectReconciled
from agentledger.fleet.agent import load_agent
from agentledger.fleet.settings import FleetSettings
from agentledger.testing import LedgerEnvironment, SimulatedCrash

CALLS: list[str] = []


@agentledger.activity
async def ask_model(order: str) -> Metered[int]:
    """A stand-in model call that costs 10 tokens."""
    CALLS.append(f"model:{order}")
    return Metered(25, tokens=10)


@agentledger.step(accept=lambda amount: 0 < amount <= 100)
async def decide(order: str) -> int:
    """Ask the model for the amount."""
    return await ask_model(order)


@agentledger.effect(provider="sandbox")
def refund(order: str, amount: int) -> EffectRequest:
    """Refund ``amount`` on ``order``."""
    return EffectRequest(kind="refunds", identity={"order": order, "amount": amount})


@agentledger.agent
async def refund_agent(order: str) -> str:
    """Decide, then refund (the effect is a step of its own)."""
    done = await refund(order, await decide(order))
    return f"refunded {order}: {done.external_ref}"


async def test_an_agent_runs_once_and_a_second_run_returns_the_recorded_result() -> None:
    """The first run calls the model and the provider once; the second performs nothing new
    and returns the same result; the steps are the functions' names, in order."""
    CALLS.clear()
    async with LedgerEnvironment() as env:
        first = await env.connection().run("r1", refund_agent, "o-7")
        second = await env.connection().run("r1", refund_agent, "o-7")
        view = await env.view("r1")
    assert first == second == f"refunded o-7: {env.provider.effects[0].id}"
    assert CALLS == ["model:o-7"]
    assert len(env.provider.effects) == 1
    assert [view.steps[i].name for i in sorted(view.steps)] == ["decide", "refund"]
    assert view.status == "succeeded"
    assert view.budget.tokens == 10


async def test_a_crash_after_the_provider_committed_is_found_by_lookup_on_resume() -> None:
    """Killed right after the provider performed the refund, the run resumed by another worker
    finds it by lookup (LANDED) and the refund happens once."""
    CALLS.clear()
    async with LedgerEnvironment() as env:
        doomed = env.connection(kill_switch=env.crash_switch("after_provider_commit"))
        with pytest.raises(SimulatedCrash):
            await doomed.run("r1", refund_agent, "o-7")
        env.expire_leases()
        result = await env.connection().run("r1", refund_agent, "o-7")
        events = await env.events("r1")
    assert result == f"refunded o-7: {env.provider.effects[0].id}"
    assert len(env.provider.effects) == 1
    assert CALLS == ["model:o-7"]  # the decide step was checkpointed before the crash
    assert [e.finding for e in events if isinstance(e, EffectReconciled)] == ["LANDED"]


async def test_resume_waits_for_a_lease_held_by_another_worker_and_says_so_once() -> None:
    """A resume while another worker still holds the run waits (one lease_wait log line) and
    continues once the lease is free; with no wait it fails at once with LeaseHeldError."""
    async with LedgerEnvironment() as env:
        crash = env.connection(kill_switch=env.crash_switch("after_provider_commit"))
        with pytest.raises(SimulatedCrash):
            await crash.run("r1", refund_agent, "o-7")
        with pytest.raises(LeaseHeldError):
            await env.connection().run("r1", refund_agent, "o-7")

        async def expire_soon() -> None:
            await asyncio.sleep(0.05)
            env.expire_leases()

        with capture_logs() as logs:
            expiry = asyncio.create_task(expire_soon())
            result = await env.connection(lease_wait_s=30.0).run("r1", refund_agent, "o-7")
            await expiry
    assert result.startswith("refunded o-7: ")
    assert [e["event"] for e in logs].count("lease_wait") == 1
    assert len(env.provider.effects) == 1


async def test_steps_without_a_plan_are_checked_against_the_record_on_resume() -> None:
    """A RunSpec without a plan takes steps as the code calls them; a resumed run whose code
    calls another step at a checkpointed place is refused (ReplayMismatchError)."""
    spec = RunSpec(run_id="r1", agent="t")

    async def body(step: Step) -> int:
        return 1

    async with LedgerEnvironment() as env:
        with pytest.raises(SimulatedCrash):
            async with env.ledger(kill_switch=env.crash_switch("after_checkpoint")).run(
                spec
            ) as run:
                await run.step("first", body)
        env.expire_leases()
        with pytest.raises(ReplayMismatchError, match="recorded as 'first'"):
            async with env.ledger().run(spec) as run:
                await run.step("other", body)


async def test_a_sync_activity_is_a_usage_error_naming_the_step() -> None:
    """An activity function that is not async: a UsageError naming the activity and the step
    and saying to make it ``async def`` (the decorator refuses it when it is defined)."""
    spec = RunSpec(run_id="r1", agent="t", plan=("decide",))

    def sync_model() -> Metered[int]:
        return Metered(1)

    async def body(step: Step) -> Any:
        return await step.activity("llm", sync_model)  # type: ignore[arg-type]

    async with LedgerEnvironment() as env:
        with pytest.raises(UsageError, match=r"activity 'llm' of step 'decide'.*async def"):
            async with env.ledger().run(spec) as run:
                await run.step("decide", body)
    with pytest.raises(ConfigurationError, match=r"activity 'sync_model' is not an `async def`"):
        agentledger.activity(sync_model)  # type: ignore[arg-type]


async def test_a_step_returning_the_effect_result_is_a_usage_error_saying_what_to_return() -> None:
    """A step that returns the EffectResult: a UsageError naming the step and the effect and
    saying to return JSON such as its external_ref."""

    @agentledger.step
    async def pay(order: str) -> Any:
        return await refund(order, 5)

    @agentledger.agent
    async def careless(order: str) -> Any:
        return await pay(order)

    async with LedgerEnvironment() as env:
        with pytest.raises(UsageError, match=r"step 'pay' returned the EffectResult.*external_ref"):
            await env.connection().run("r1", careless, "o-1")


async def test_an_accept_check_returning_none_is_a_usage_error_naming_the_step() -> None:
    """accept= returning None: a UsageError naming the step and what a check may return."""

    def forgot_return(amount: int) -> None:
        Check("positive", amount > 0)

    @agentledger.step(accept=forgot_return)  # type: ignore[arg-type]
    async def sized(order: str) -> int:
        return 3

    @agentledger.agent
    async def checked(order: str) -> int:
        return await sized(order)

    async with LedgerEnvironment() as env:
        with pytest.raises(UsageError, match=r"accept= check of step 'sized' returned None"):
            await env.connection().run("r1", checked, "o-1")


async def test_calling_a_step_outside_a_run_is_a_configuration_error() -> None:
    """A step called with no run around it says how to start one."""
    with pytest.raises(ConfigurationError, match=r"step 'decide' was called outside a run"):
        await decide("o-1")


def test_a_decorated_agent_is_the_fleets_agent_definition() -> None:
    """``@agentledger.agent`` makes the one Agent definition: a fleet loads it by MODULE:ATTR,
    and its spec names the agent and records the arguments as the input."""
    loaded = load_agent(f"{__name__}:refund_agent", FleetSettings())
    assert loaded is refund_agent
    assert isinstance(loaded, agentledger.Agent)
    spec = loaded.spec("r9", {"args": ["o-9"], "kwargs": {}})
    assert (spec.agent, spec.plan, spec.input) == (
        "refund_agent",
        (),
        {"args": ["o-9"], "kwargs": {}},
    )
