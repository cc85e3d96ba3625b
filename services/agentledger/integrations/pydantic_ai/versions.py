"""Version stamps of a Pydantic AI agent: its model, a hash of its prompts, a hash of its tools."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from agentledger.providers.hashing import sha256_hex
from agentledger.views import Versions


def model_version(agent: Agent[Any, Any]) -> str:
    """``system:model_name`` of the agent's model (the string as given when it is not built)."""
    model = agent.model
    if isinstance(model, Model):
        return f"{model.system}:{model.model_name}"
    return str(model or "")


def _text(part: Any) -> str:
    """A prompt part as text: its string, or the qualified name of the function producing it."""
    if isinstance(part, str):
        return part
    inner = getattr(part, "instruction", part)
    if isinstance(inner, str):
        return inner
    return f"{getattr(inner, '__module__', '')}.{getattr(inner, '__qualname__', repr(inner))}"


def prompt_version(agent: Agent[Any, Any]) -> str:
    """sha256 of the agent's system prompts and instructions (functions count by their names)."""
    # Agent keeps them in private fields only; a missing one counts as empty, never as an error.
    prompts = [_text(p) for p in getattr(agent, "_system_prompts", ())]
    functions = [_text(f) for f in getattr(agent, "_system_prompt_functions", ())]
    instructions = [_text(i) for i in getattr(agent, "_instructions", ())]
    return sha256_hex(
        {"instructions": instructions, "system_prompt_functions": functions, "system": prompts}
    )[:16]


def _function_toolsets(agent: Agent[Any, Any]) -> list[FunctionToolset[Any]]:
    found: list[FunctionToolset[Any]] = []

    def collect(leaf: AbstractToolset[Any]) -> None:
        if isinstance(leaf, FunctionToolset):
            found.append(leaf)

    for toolset in agent.toolsets:
        toolset.apply(collect)
    return found


def tool_schema_version(agent: Agent[Any, Any]) -> str:
    """sha256 of every function tool's name, description and argument schema, sorted by name."""
    tools: dict[str, Any] = {}
    for toolset in _function_toolsets(agent):
        for name, tool in toolset.tools.items():
            d = tool.tool_def
            tools[name] = {
                "description": d.description or "",
                "parameters": d.parameters_json_schema,
            }
    return sha256_hex(dict(sorted(tools.items())))[:16]


def agent_versions(agent: Agent[Any, Any], *, code: str = "") -> Versions:
    """What a run of ``agent`` is stamped with, and checked against on every resume."""
    return Versions(
        code=code,
        prompt=prompt_version(agent),
        tool_schema=tool_schema_version(agent),
        model=model_version(agent),
    )
