"""``run_agent``: one Pydantic AI agent run as one agentledger run, started or resumed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.usage import UsageLimits

from agentledger._core.versions import Policy
from agentledger.errors import ConfigurationError
from agentledger.events.models import FINISHED_STATUSES
from agentledger.integrations.pydantic_ai.durability import AgentLedgerDurability
from agentledger.integrations.pydantic_ai.units import PLAN_CHUNK, UNIT, RunUnits
from agentledger.integrations.pydantic_ai.versions import agent_versions
from agentledger.worker import Ledger, Limits, RunSpec

_OUTPUT: TypeAdapter[Any] = TypeAdapter(Any)


@dataclass(frozen=True)
class AgentRun:
    """How a durable agent run ended (this time): its status, output and what was sent.

    ``status`` is the run's (``succeeded`` once finished); ``output`` the recorded output, as
    JSON; ``sent`` the model requests this process sent, ``replayed`` the ones it took from the
    record instead.
    """

    run_id: str
    status: str
    output: Any
    sent: int
    replayed: int


def _durability(agent: Agent[Any, Any]) -> AgentLedgerDurability[Any]:
    found = AgentLedgerDurability.from_agent(agent)
    if found is None:
        msg = (
            f"agent {agent.name!r} has no AgentLedgerDurability: build it with "
            "Agent(..., capabilities=[AgentLedgerDurability()])"
        )
        raise ConfigurationError(msg)
    return found


async def run_agent(
    agent: Agent[Any, Any],
    prompt: str,
    *,
    ledger: Ledger,
    run_id: str,
    deps: Any = None,
    limits: Limits | None = None,
    code_version: str = "",
    version_policy: Policy = "refuse",
    message_history: Sequence[ModelMessage] | None = None,
    usage_limits: UsageLimits | None = None,
) -> AgentRun:
    """Run ``agent`` on ``prompt`` as run ``run_id``, or resume that run where it stopped.

    Each model request is a step with its response recorded as an activity (tokens and
    dollars as cost); each tool call is a step. A resume replays the recorded steps (no model
    request is sent again), looks up every effect left open, and goes on. ``limits`` (tokens,
    USD, steps) are stamped on the run's start and hold across resumes; the run is stamped
    with the model, a hash of the prompts and a hash of the tool schemas, checked on resume
    under ``version_policy``. A finished run returns its recorded output without running.
    ``usage_limits`` are Pydantic AI's own; replayed requests count toward them again.
    Raises what the run stops with: RunPausedError (waiting for approval or reconciliation),
    BudgetExceededError, ApprovalError, VersionDriftError …
    """
    durability = _durability(agent)
    spec = RunSpec(
        run_id=run_id,
        agent=agent.name or durability.name,
        plan=[UNIT] * (limits.steps if limits and limits.steps else PLAN_CHUNK),
        input={"prompt": prompt},
        versions=agent_versions(agent, code=code_version),
        limits=limits or Limits(),
        version_policy=version_policy,
    )
    async with ledger.run(spec) as run:
        if run.status in FINISHED_STATUSES:
            return AgentRun(run_id, run.status, run.result, sent=0, replayed=0)
        recorded = run.input  # a resumed run goes on with what it was started with
        units = RunUnits(run, ledger.services.payloads, price=durability.price)
        token = units.enter()
        try:
            result = await agent.run(
                recorded["prompt"],
                deps=deps,
                message_history=message_history,
                usage_limits=usage_limits,
            )
        finally:
            units.leave(token)
        output = _OUTPUT.dump_python(result.output, mode="json")
        await run.finish(output)
        return AgentRun(run_id, run.status, output, sent=units.sent, replayed=units.replayed)
