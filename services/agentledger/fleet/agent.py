"""What a fleet worker runs: an :class:`Agent`, built by a ``MODULE:FACTORY`` from settings."""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentledger._core.spec import RunSpec
from agentledger.errors import ConfigurationError
from agentledger.fleet.settings import FleetSettings
from agentledger.providers.protocol import Provider
from agentledger.worker import Run

SpecFn = Callable[[str, Any], RunSpec]
BodyFn = Callable[[Run, Any], Awaitable[Any]]
ProvidersFn = Callable[[], Mapping[str, Provider]]


@dataclass(frozen=True)
class Agent:
    """An agent the fleet can start and resume.

    ``spec(run_id, input)`` gives the run's plan, versions and limits; ``body(run, input)`` walks
    the steps (it is called again from the top on every resume: checkpointed steps replay);
    ``providers()`` builds the named providers its effects go to (started and stopped by the
    worker around its whole life).
    """

    name: str
    spec: SpecFn
    body: BodyFn
    providers: ProvidersFn


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
