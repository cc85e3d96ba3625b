"""Effect providers: the port, canonical hashes, the HTTP adapter and an in-memory provider.

The sandbox provider (a separate HTTP process) lives in :mod:`agentledger.providers.sandbox`.
"""

from __future__ import annotations

from agentledger.providers.faults import FaultRule
from agentledger.providers.hashing import (
    canonical_json,
    identity_hash,
    payload_hash,
    response_hash,
    sha256_hex,
)
from agentledger.providers.http import HttpProvider
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import (
    CompensatingProvider,
    EffectRequest,
    JsonScalar,
    LookupResult,
    Provider,
    ProviderResult,
    supports_compensation,
)
from agentledger.providers.settings import ProviderSettings

__all__ = [
    "CompensatingProvider",
    "EffectRequest",
    "FaultRule",
    "HttpProvider",
    "JsonScalar",
    "LookupResult",
    "MemoryProvider",
    "Provider",
    "ProviderResult",
    "ProviderSettings",
    "canonical_json",
    "identity_hash",
    "payload_hash",
    "response_hash",
    "sha256_hex",
    "supports_compensation",
]
