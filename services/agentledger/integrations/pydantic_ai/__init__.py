"""agentledger under Pydantic AI: an agent run recorded as an agentledger run, its effects never
performed twice. Needs the ``pydantic-ai`` extra (pip install -e '.[pydantic-ai]').

    agent = Agent(model, name="support", capabilities=[AgentLedgerDurability()])
    agent.tool_plain(refund)            # refund = effect_tool(provider="sandbox")(build_refund)
    done = await run_agent(agent, "refund order 7", ledger=ledger, run_id="r1")
"""

from __future__ import annotations

from agentledger.integrations.pydantic_ai.durability import AgentLedgerDurability
from agentledger.integrations.pydantic_ai.effects import (
    effect_tool,
    outcome,
    perform_effect,
    require_approval,
)
from agentledger.integrations.pydantic_ai.running import AgentRun, run_agent
from agentledger.integrations.pydantic_ai.versions import agent_versions
from agentledger.worker import EffectResult

__all__ = [
    "AgentLedgerDurability",
    "AgentRun",
    "EffectResult",
    "agent_versions",
    "effect_tool",
    "outcome",
    "perform_effect",
    "require_approval",
    "run_agent",
]
