"""agentledger under LangGraph: a checkpointer whose checkpoints are agentledger events, and
tools whose effects never run twice. Needs the ``langgraph`` extra (pip install -e '.[langgraph]').
"""

from __future__ import annotations

from agentledger._core.spec import EffectResult
from agentledger.integrations.langgraph.effects import EffectCall, graph_effect_key
from agentledger.integrations.langgraph.saver import AgentLedgerSaver
from agentledger.integrations.langgraph.settings import SaverSettings
from agentledger.integrations.langgraph.tool import effect_tool

__all__ = [
    "AgentLedgerSaver",
    "EffectCall",
    "EffectResult",
    "SaverSettings",
    "effect_tool",
    "graph_effect_key",
]
