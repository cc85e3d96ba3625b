"""agentledger: a durable record of AI-agent runs that survives kill -9 at any instant.

``__all__`` below is the public surface, pinned by ``tests/unit/test_public_surface.py``;
everything else (``agentledger._core``, the services' packages) is internal.

    async with agentledger.connect(providers={"payments": "sandbox"}) as ledger:
        print(await ledger.run("refund-o-7", refund_agent, "o-7"))
"""

from __future__ import annotations

from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentledger._core.agent import Agent
    from agentledger.errors import (
        AgentLedgerError,
        ApprovalError,
        BudgetExceededError,
        ConfigurationError,
        EffectFailedError,
        EffectUnknownError,
        IdentityMismatchError,
        LeaseHeldError,
        ReplayMismatchError,
        RunClosedError,
        RunPausedError,
        StepRejectedError,
        UsageError,
        VersionDriftError,
    )
    from agentledger.providers.http import HttpProvider
    from agentledger.providers.protocol import EffectRequest, Provider
    from agentledger.redaction import DEFAULT_REDACTOR, Redactor, Rule
    from agentledger.views import Versions
    from agentledger.worker import (
        BlobStore,
        Check,
        EffectResult,
        FileBlobStore,
        Ledger,
        Limits,
        Metered,
        Payloads,
        Run,
        RunSpec,
        Step,
        WorkerSettings,
        effect_key,
        intent_hash,
    )
    from agentledger.worker.connection import Connection, connect
    from agentledger.worker.define import activity, agent, effect, step

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_REDACTOR",
    "Agent",
    "AgentLedgerError",
    "ApprovalError",
    "BlobStore",
    "BudgetExceededError",
    "Check",
    "ConfigurationError",
    "Connection",
    "EffectFailedError",
    "EffectRequest",
    "EffectResult",
    "EffectUnknownError",
    "FileBlobStore",
    "HttpProvider",
    "IdentityMismatchError",
    "LeaseHeldError",
    "Ledger",
    "Limits",
    "Metered",
    "Payloads",
    "Provider",
    "Redactor",
    "ReplayMismatchError",
    "Rule",
    "Run",
    "RunClosedError",
    "RunPausedError",
    "RunSpec",
    "Step",
    "StepRejectedError",
    "UsageError",
    "VersionDriftError",
    "Versions",
    "WorkerSettings",
    "__version__",
    "activity",
    "agent",
    "connect",
    "effect",
    "effect_key",
    "intent_hash",
    "step",
]

# Where the names of __all__ live, cheapest first: a name is imported on first use, so that
# `import agentledger.errors` or a CLI call that needs only the stack does not pay for aiokafka,
# aiohttp and redis. (The test of the public surface checks that each name is found here.)
_HOMES = (
    "agentledger.errors",
    "agentledger.redaction",
    "agentledger.views",
    "agentledger.providers.protocol",
    "agentledger.providers.http",
    "agentledger._core.agent",
    "agentledger.worker",
    "agentledger.worker.define",
    "agentledger.worker.connection",
)


def __getattr__(name: str) -> Any:
    if name in __all__:
        for home in _HOMES:
            value = vars(import_module(home)).get(name)
            if value is not None and not isinstance(value, ModuleType):  # not a submodule
                globals()[name] = value
                return value
    msg = f"module 'agentledger' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted(__all__)
