"""agentledger: a durable record of AI-agent runs that survives kill -9 at any instant.

The public API an agent author needs is re-exported here; everything else lives in the
subpackages (``agentledger.worker``, ``agentledger.providers``, ``agentledger.testing`` …).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentledger.errors import (
        AgentLedgerError,
        ApprovalError,
        BudgetExceededError,
        EffectFailedError,
        EffectUnknownError,
        IdentityMismatchError,
        ReplayMismatchError,
        RunClosedError,
        RunPausedError,
        StepRejectedError,
        VersionDriftError,
    )
    from agentledger.providers.protocol import (
        EffectRequest,
        Provider,
    )
    from agentledger.redaction import (
        DEFAULT_REDACTOR,
        Redactor,
        Rule,
    )
    from agentledger.views import (
        Versions,
    )
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

__version__ = "0.1.0"

# Imported on first use, so that `import agentledger.errors` or a CLI call that needs only the
# stack does not pay for aiokafka, aiohttp and redis.
_LAZY: dict[str, str] = {
    "AgentLedgerError": "agentledger.errors",
    "ApprovalError": "agentledger.errors",
    "BudgetExceededError": "agentledger.errors",
    "EffectFailedError": "agentledger.errors",
    "EffectUnknownError": "agentledger.errors",
    "IdentityMismatchError": "agentledger.errors",
    "ReplayMismatchError": "agentledger.errors",
    "RunClosedError": "agentledger.errors",
    "RunPausedError": "agentledger.errors",
    "StepRejectedError": "agentledger.errors",
    "VersionDriftError": "agentledger.errors",
    "EffectRequest": "agentledger.providers.protocol",
    "Provider": "agentledger.providers.protocol",
    "DEFAULT_REDACTOR": "agentledger.redaction",
    "Redactor": "agentledger.redaction",
    "Rule": "agentledger.redaction",
    "Versions": "agentledger.views",
    "BlobStore": "agentledger.worker",
    "Check": "agentledger.worker",
    "EffectResult": "agentledger.worker",
    "FileBlobStore": "agentledger.worker",
    "Ledger": "agentledger.worker",
    "Limits": "agentledger.worker",
    "Metered": "agentledger.worker",
    "Payloads": "agentledger.worker",
    "Run": "agentledger.worker",
    "RunSpec": "agentledger.worker",
    "Step": "agentledger.worker",
    "WorkerSettings": "agentledger.worker",
    "effect_key": "agentledger.worker",
    "intent_hash": "agentledger.worker",
}


__all__ = [
    "DEFAULT_REDACTOR",
    "AgentLedgerError",
    "ApprovalError",
    "BlobStore",
    "BudgetExceededError",
    "Check",
    "EffectFailedError",
    "EffectRequest",
    "EffectResult",
    "EffectUnknownError",
    "FileBlobStore",
    "IdentityMismatchError",
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
    "VersionDriftError",
    "Versions",
    "WorkerSettings",
    "__version__",
    "effect_key",
    "intent_hash",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        msg = f"module 'agentledger' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
