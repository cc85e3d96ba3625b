"""agentledger: a durable record of AI-agent runs that survives kill -9 at any instant.

The public API an agent author needs is re-exported here; everything else lives in the
subpackages (``agentledger.worker``, ``agentledger.providers``, ``agentledger.testing`` …).
"""

from __future__ import annotations

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

__version__ = "0.1.0"

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
