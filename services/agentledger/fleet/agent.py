"""What a fleet worker runs: an :class:`Agent` (the SDK's one definition), from ``MODULE:ATTR``."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from agentledger._core.agent import Agent
from agentledger.errors import ConfigurationError
from agentledger.fleet.settings import FleetSettings

__all__ = ["Agent", "AgentFactory", "agent_name", "load_agent"]


AgentFactory = Callable[[FleetSettings], Agent]


def load_agent(target: str, settings: FleetSettings) -> Agent:
    """Import ``MODULE:FACTORY`` and call the factory with ``settings``."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        msg = f"--agent {target!r}: use MODULE:FACTORY, e.g. agentledger.fleet.examples:refund"
        raise ConfigurationError(msg)
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        msg = f"--agent {target!r}: cannot import {module_name} ({e})"
        raise ConfigurationError(msg) from e
    factory = getattr(module, attr, None)
    if isinstance(factory, Agent):  # an ``@agentledger.agent`` function is an Agent itself
        return factory
    if not callable(factory):
        msg = f"--agent {target!r}: {module_name} has no callable {attr!r}"
        raise ConfigurationError(msg)
    agent = factory(settings)
    if not isinstance(agent, Agent):
        msg = f"--agent {target!r}: the factory returned {type(agent).__name__}, not an Agent"
        raise ConfigurationError(msg)
    return agent


def agent_name(target: str, settings: FleetSettings) -> str:
    """The agent's name: ``target`` itself, or the name of the agent a MODULE:FACTORY builds."""
    return load_agent(target, settings).name if ":" in target else target
