"""The one definition of an agent, shared by the SDK's ``@agent`` and the fleet's workers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentledger._core.spec import RunSpec
from agentledger.providers.protocol import Provider

SpecFn = Callable[[str, Any], RunSpec]
#: ``body(run, input)``: ``run`` is the SDK's :class:`~agentledger.Run` (typed Any here so that
#: the core does not import the SDK built on it).
BodyFn = Callable[[Any, Any], Awaitable[Any]]
ProvidersFn = Callable[[], Mapping[str, Provider]]


@dataclass(frozen=True)
class Agent:
    """An agent that can be started and resumed, by ``agentledger.connect`` or by a fleet.

    ``spec(run_id, input)`` gives the run's plan, versions and limits; ``body(run, input)`` walks
    the steps (it is called again from the top on every resume: checkpointed steps replay);
    ``providers()`` builds the named providers its effects go to (a fleet worker starts and
    stops them around its whole life).
    """

    name: str
    spec: SpecFn
    body: BodyFn
    providers: ProvidersFn = field(default=dict)
