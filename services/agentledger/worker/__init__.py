"""The worker SDK: open a run, walk its steps, record activities and effects, resume anywhere."""

from __future__ import annotations

from agentledger._core.blobs import BlobRef, BlobStore, FileBlobStore, MemoryBlobStore
from agentledger._core.keys import effect_key, intent_hash
from agentledger._core.killswitch import KILL_POINTS, KillSwitch
from agentledger._core.payloads import Payloads
from agentledger._core.settings import WorkerSettings
from agentledger._core.spec import Check, EffectResult, Limits, Metered, RunSpec
from agentledger.worker.connection import Connection, connect
from agentledger.worker.ledger import Ledger
from agentledger.worker.run import Run
from agentledger.worker.step import Step

__all__ = [
    "KILL_POINTS",
    "BlobRef",
    "BlobStore",
    "Check",
    "Connection",
    "EffectResult",
    "FileBlobStore",
    "KillSwitch",
    "Ledger",
    "Limits",
    "MemoryBlobStore",
    "Metered",
    "Payloads",
    "Run",
    "RunSpec",
    "Step",
    "WorkerSettings",
    "connect",
    "effect_key",
    "intent_hash",
]
