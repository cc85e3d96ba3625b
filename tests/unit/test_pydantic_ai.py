"""Pydantic AI on agentledger (in-memory ports): requests recorded and reused, effects once."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agentledger.errors import (
    ApprovalError,
    BudgetExceededError,
    ConfigurationError,
    IdentityMismatchError,
    RunPausedError,
    VersionDriftError,
)
from agentledger.events import ActivityRecorded, EffectIntended, PlanRevised, RunStarted
from agentledger.integrations.pydantic_ai import (
    AgentLedgerDurability,
    effect_tool,
    perform_effect,
    run_agent,
)
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest, ProviderResult
from agentledger.testing import LedgerEnvironment, SimulatedCrash
from agentledger.worker import Limits


class CountingProvider(MemoryProvider):
    """A memory provider that counts every perform call (it dedups by key on its own)."""

    def __init__(self) -> None:
        super().__init__(name="sandbox")
        self.calls = 0

    async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
        """Count the call, then perform."""
        self.calls += 1
        return await super().perform(request, key)


class Script:
    """A scripted model: refund the order, then answer; counts the requests it is sent."""

    def __init__(self, *, retries: int = 0, amounts: list[int] | None = None) -> None:
        self.requests: list[int] = []  # messages in each request received
        self.amounts = amounts or [1500]

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        self.requests.append(len(messages))
        returns = [
            p
            for m in messages
            for p in m.parts
            if getattr(p, "part_kind", "") == "tool-return" and p.tool_name == "refund"
        ]
        done = [p for p in returns if getattr(p, "outcome", "success") == "success"]
        if done:
            return ModelResponse(parts=[TextPart(f"refunded: {done[-1].content}")])
        amount = self.amounts[min(len(returns), len(self.amounts) - 1)]
        args = {"order_id": "ord-7", "amount_cents": amount}
        return ModelResponse(parts=[ToolCallPart("refund", args, tool_call_id=f"c{len(returns)}")])


def refund_request(order_id: str, amount_cents: int) -> EffectRequest:
    """The refund's request: order and amount are its identity."""
    return EffectRequest(
        kind="refunds", identity={"order_id": order_id, "amount_cents": amount_cents}
    )


def support_agent(script: Script, *, retry_after_effect: int = 0, prompt: str = "") -> Agent:
    """An agent whose refund tool performs the effect, then asks for ``retry_after_effect``
    retries (ModelRetry) before it returns."""
    agent: Agent[None, str] = Agent(
        FunctionModel(script, model_name="scripted"),
        name="support",
        system_prompt=prompt or "You are a support agent.",
        capabilities=[AgentLedgerDurability()],
    )

    @agent.tool(retries=3)
    async def refund(ctx: RunContext[None], order_id: str, amount_cents: int) -> dict[str, Any]:
        """Refund an order."""
        done = await perform_effect("refund", refund_request(order_id, amount_cents))
        if ctx.retry < retry_after_effect:  # the run's retry count: replayed like the rest
            raise ModelRetry("confirm the amount")
        return {"ref": done.external_ref, "replayed": done.replayed}

    return agent


@pytest.fixture
async def env() -> Any:
    """In-memory log, leases and a counting provider named sandbox."""
    provider = CountingProvider()
    async with LedgerEnvironment(providers={"sandbox": provider}) as e:
        e.provider = provider
        yield e


async def test_each_model_request_is_an_activity_with_its_tokens(env: Any) -> None:
    """A run records every model request as a model activity whose tokens are its usage."""
    script = Script()
    done = await run_agent(support_agent(script), "refund", ledger=env.ledger(), run_id="r1")
    assert done.status == "succeeded"
    assert done.output.startswith("refunded: ")
    events = await env.events("r1")
    requests = [e for e in events if isinstance(e, ActivityRecorded)]
    assert [(a.kind, a.name) for a in requests] == [("model", "model-request")] * 2
    assert all(a.tokens > 0 for a in requests)
    view = await env.view("r1")
    assert view.budget.tokens == sum(a.tokens for a in requests)
    assert done.sent == 2


async def test_a_finished_run_returns_its_output_without_running(env: Any) -> None:
    """Running a finished run again sends nothing and returns the recorded output."""
    script = Script()
    first = await run_agent(support_agent(script), "refund", ledger=env.ledger(), run_id="r1")
    again = await run_agent(support_agent(script), "refund", ledger=env.ledger(), run_id="r1")
    assert again.output == first.output
    assert len(script.requests) == 2
    assert env.provider.calls == 1


async def test_a_crash_after_the_provider_call_resumes_without_resending(env: Any) -> None:
    """Killed right after the provider performed the refund, the resumed run looks the key up,
    performs nothing again and sends only the model request that was never recorded."""
    script = Script()
    crashing = env.ledger(kill_switch=env.crash_switch("after_provider_commit"))
    with pytest.raises(SimulatedCrash):
        await run_agent(support_agent(script), "refund", ledger=crashing, run_id="r1")
    assert script.requests == [1]
    env.expire_leases()
    resumed = Script()
    done = await run_agent(support_agent(resumed), "refund", ledger=env.ledger(), run_id="r1")
    assert done.status == "succeeded"
    assert resumed.requests == [3]  # the first request came from the record
    assert (done.sent, done.replayed) == (1, 1)
    assert env.provider.calls == 1
    assert len(env.provider.effects) == 1
    assert sum(env.provider.lookups.values()) == 1


async def test_model_retry_after_the_effect_does_not_perform_it_again(env: Any) -> None:
    """A tool that raises ModelRetry after its refund went through: the retried call gets the
    recorded refund (same key, replayed) and the provider is called once."""
    script = Script()
    agent = support_agent(script, retry_after_effect=1)
    done = await run_agent(agent, "refund", ledger=env.ledger(), run_id="r1")
    assert done.status == "succeeded"
    assert len(script.requests) == 3  # refund, retried refund, answer
    assert env.provider.calls == 1
    assert "'replayed': True" in done.output
    intents = [e for e in await env.events("r1") if isinstance(e, EffectIntended)]
    assert len(intents) == 1


async def test_model_retry_replays_the_same_after_a_resume(env: Any) -> None:
    """Crashed after the retried call's model request, a resumed run replays both calls and
    still never performs the refund again."""
    script = Script()
    crashing = env.ledger(kill_switch=env.crash_switch("after_checkpoint", hit=3))
    with pytest.raises(SimulatedCrash):
        await run_agent(
            support_agent(script, retry_after_effect=1), "refund", ledger=crashing, run_id="r1"
        )
    env.expire_leases()
    resumed = Script()
    agent = support_agent(resumed, retry_after_effect=1)
    done = await run_agent(agent, "refund", ledger=env.ledger(), run_id="r1")
    assert done.status == "succeeded"
    assert env.provider.calls == 1
    assert done.replayed == 2


async def test_a_retry_with_other_identity_fields_pauses_instead_of_sending(env: Any) -> None:
    """A retried call that changes the refund's amount stops the run on an identity mismatch:
    the provider is not asked for a second refund."""
    script = Script(amounts=[1500, 9900])
    agent = support_agent(script, retry_after_effect=1)
    with pytest.raises(IdentityMismatchError):
        await run_agent(agent, "refund", ledger=env.ledger(), run_id="r1")
    assert env.provider.calls == 1
    assert (await env.view("r1")).status == "paused"


async def test_the_token_budget_holds_across_a_resume(env: Any) -> None:
    """Tokens spent before a crash count after it: a limit that two requests' tokens exceed
    only together stops the resumed run at its first request of its own."""
    await run_agent(support_agent(Script()), "refund", ledger=env.ledger(), run_id="probe")
    spent = [e.tokens for e in await env.events("probe") if isinstance(e, ActivityRecorded)]
    limits = Limits(tokens=spent[0] + spent[1] - 1)
    crashing = env.ledger(kill_switch=env.crash_switch("after_checkpoint"))
    with pytest.raises(SimulatedCrash):
        await run_agent(
            support_agent(Script()), "refund", ledger=crashing, run_id="r1", limits=limits
        )
    env.expire_leases()
    resumed = Script()
    with pytest.raises(BudgetExceededError):
        await run_agent(support_agent(resumed), "refund", ledger=env.ledger(), run_id="r1")
    assert resumed.requests == [3]
    assert (await env.view("r1")).status == "budget_exceeded"


async def test_the_step_budget_stops_the_run(env: Any) -> None:
    """A run limited to two steps stops before its third (the second model request)."""
    with pytest.raises(BudgetExceededError):
        await run_agent(
            support_agent(Script()),
            "refund",
            ledger=env.ledger(),
            run_id="r1",
            limits=Limits(steps=2),
        )
    assert (await env.view("r1")).status == "budget_exceeded"


async def test_the_run_is_stamped_with_model_prompt_and_tool_schema(env: Any) -> None:
    """RunStarted carries the model name and hashes of the prompt and tools; a resume under
    another system prompt is refused."""
    crashing = env.ledger(kill_switch=env.crash_switch("after_checkpoint"))
    with pytest.raises(SimulatedCrash):
        await run_agent(support_agent(Script()), "refund", ledger=crashing, run_id="r1")
    (started,) = [e for e in await env.events("r1") if isinstance(e, RunStarted)]
    assert started.model_version == "function:scripted"
    assert len(started.prompt_version) == 16
    assert len(started.tool_schema_version) == 16
    env.expire_leases()
    other = support_agent(Script(), prompt="You are a pirate.")
    with pytest.raises(VersionDriftError):
        await run_agent(other, "refund", ledger=env.ledger(), run_id="r1")


async def test_an_approval_tool_pauses_before_the_refund(env: Any) -> None:
    """An effect tool with an approval pauses the run with nothing sent; once approved, the
    resumed run performs the refund once without asking the model again for recorded steps."""
    script = Script()

    def agent_for(s: Script) -> Agent:
        agent: Agent[None, str] = Agent(
            FunctionModel(s, model_name="scripted"),
            name="support",
            capabilities=[AgentLedgerDurability()],
        )
        agent.tool_plain(name="refund")(
            effect_tool("sandbox", name="refund", approval="refund this order?")(refund_request)
        )
        return agent

    with pytest.raises(RunPausedError):
        await run_agent(agent_for(script), "refund", ledger=env.ledger(), run_id="r1")
    assert env.provider.calls == 0
    await env.ledger().decide("r1", "approved", approver="lead")
    resumed = Script()
    done = await run_agent(agent_for(resumed), "refund", ledger=env.ledger(), run_id="r1")
    assert done.status == "succeeded"
    assert env.provider.calls == 1
    assert resumed.requests == [3]


async def test_a_rejected_refund_finishes_the_run_as_rejected_with_nothing_sent(env: Any) -> None:
    """A person rejects the paused refund: the resumed run finishes as rejected (ApprovalError)
    and the provider is never called."""

    def agent_for() -> Agent:
        agent: Agent[None, str] = Agent(
            FunctionModel(Script(), model_name="scripted"),
            name="support",
            capabilities=[AgentLedgerDurability()],
        )
        agent.tool_plain(name="refund")(
            effect_tool("sandbox", name="refund", approval="refund this order?")(refund_request)
        )
        return agent

    with pytest.raises(RunPausedError):
        await run_agent(agent_for(), "refund", ledger=env.ledger(), run_id="r1")
    await env.ledger().decide("r1", "rejected", approver="lead")
    with pytest.raises(ApprovalError):
        await run_agent(agent_for(), "refund", ledger=env.ledger(), run_id="r1")
    assert env.provider.calls == 0
    assert (await env.view("r1")).status == "rejected"


async def test_outside_a_recorded_run_the_agent_runs_plainly(env: Any) -> None:
    """agent.run without run_agent records nothing; an effect there is a configuration error."""
    script = Script()
    agent = support_agent(script)
    with pytest.raises(ConfigurationError):
        await agent.run("refund")
    assert env.provider.calls == 0


async def test_a_run_longer_than_its_plan_grows_the_plan_and_resumes(env: Any) -> None:
    """A run of more steps than planned revises its plan once (doubling it) and a resume after
    a crash past that point replays every step without sending anything again."""
    calls = 33  # 33 tool calls + 34 requests: 67 steps, past the first 64

    def loop(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        done = sum(1 for m in messages for p in m.parts if p.part_kind == "tool-return")
        if done >= calls:
            return ModelResponse(parts=[TextPart(f"{done} done")])
        return ModelResponse(parts=[ToolCallPart("refund", {"order_id": f"o{done}"})])

    def agent_for() -> Agent:
        agent: Agent[None, str] = Agent(
            FunctionModel(loop, model_name="loop"),
            name="loop",
            capabilities=[AgentLedgerDurability()],
        )

        @agent.tool_plain
        async def refund(order_id: str) -> str:
            """Refund an order."""
            return (await perform_effect("refund", refund_request(order_id, 1))).key

        return agent

    crashing = env.ledger(kill_switch=env.crash_switch("after_checkpoint", hit=66))
    with pytest.raises(SimulatedCrash):
        await run_agent(agent_for(), "go", ledger=crashing, run_id="r1")
    env.expire_leases()
    done = await run_agent(agent_for(), "go", ledger=env.ledger(), run_id="r1")
    assert done.output == f"{calls} done"
    assert (done.sent, done.replayed) == (1, calls)
    assert env.provider.calls == calls
    revised = [e for e in await env.events("r1") if isinstance(e, PlanRevised)]
    assert [len(e.plan) for e in revised] == [128]


async def test_a_price_charges_dollars_and_the_usd_budget_stops_the_run(env: Any) -> None:
    """With ``price``, each request's usage is charged in dollars; a USD limit below two
    requests' worth stops the run at the second, with what the first cost recorded."""

    def price(usage: dict[str, Any], model: str) -> float:
        assert model == "scripted"
        return (usage["input_tokens"] + usage["output_tokens"]) * 0.001

    def agent_for() -> Agent:
        agent: Agent[None, str] = Agent(
            FunctionModel(Script(), model_name="scripted"),
            name="support",
            capabilities=[AgentLedgerDurability(price=price)],
        )
        agent.tool_plain(name="refund")(effect_tool("sandbox", name="refund")(refund_request))
        return agent

    await run_agent(agent_for(), "refund", ledger=env.ledger(), run_id="probe")
    first = next(e.usd for e in await env.events("probe") if isinstance(e, ActivityRecorded))
    limits = Limits(usd=first + 0.0005)
    with pytest.raises(BudgetExceededError):
        await run_agent(agent_for(), "refund", ledger=env.ledger(), run_id="r1", limits=limits)
    spent = [e for e in await env.events("r1") if isinstance(e, ActivityRecorded)]
    assert [round(a.usd, 6) for a in spent] == [round(a.tokens * 0.001, 6) for a in spent]
    assert len(spent) == 2
    assert (await env.view("r1")).status == "budget_exceeded"
