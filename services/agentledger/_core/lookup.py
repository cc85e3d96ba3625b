"""The one lookup decision: what a provider's answer about an open intent means.

The SDK and the LangGraph saver (resuming a run, through
:class:`~agentledger._core.effect_flow.EffectFlow`), the reconciler and ``effects resolve`` all
read a lookup through :func:`decide`, so an answer cannot mean LANDED to one of them and
UNKNOWN to another. Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agentledger.errors import (
    ProviderConflictError,
    ProviderError,
    ProviderIdentityConflictError,
    ProviderUnavailableError,
)
from agentledger.events.models import Finding
from agentledger.providers.hashing import KEYED_PREFIX, EffectHasher, without_plain_hashes
from agentledger.providers.protocol import LookupResult
from agentledger.views.model import EffectView


@dataclass(frozen=True)
class Resolution:
    """What the provider said about one intent, as a finding."""

    idempotency_key: str
    finding: Finding
    external_ref: str | None = None
    response_hash: str | None = None
    detail: str = ""
    identity_mismatch: bool = False
    #: On an identity mismatch, the identity hash the provider holds under the key (if it said).
    found_identity_hash: str | None = None

    @property
    def resolved(self) -> bool:
        """LANDED or NOT_LANDED: the run can go on."""
        return self.finding != "UNKNOWN"


def decide(
    intent: EffectView, outcome: LookupResult | ProviderError, hasher: EffectHasher | None = None
) -> Resolution:
    """The finding for ``intent`` given the provider's lookup answer or error.

    Found with the intent's identity: LANDED. Not found: NOT_LANDED (safe to send with the same
    key). Found with another identity, unreachable, or any other error: UNKNOWN — never a guess.
    ``hasher`` (the deployment's hash key) compares a keyed intent hash with what the provider
    holds; the provider's own plain hashes are never repeated in what this returns.
    """
    key = intent.idempotency_key
    if isinstance(outcome, LookupResult):
        if outcome.result is None:
            return Resolution(key, "NOT_LANDED", detail="the provider has no effect with this key")
        result = outcome.result
        found_hash = _comparable(intent, outcome, hasher or EffectHasher())
        if found_hash is not None and intent.identity_hash and found_hash != intent.identity_hash:
            return Resolution(
                key,
                "UNKNOWN",
                detail=(
                    f"identity mismatch: the provider holds {result.external_ref} under this key "
                    f"with identity hash {found_hash}; the intent has {intent.identity_hash}"
                ),
                identity_mismatch=True,
                found_identity_hash=found_hash,
            )
        return Resolution(
            key,
            "LANDED",
            external_ref=result.external_ref,
            response_hash=result.response_hash,
            detail=f"the provider performed it as {result.external_ref}",
        )
    if isinstance(outcome, ProviderIdentityConflictError | ProviderConflictError):
        told = outcome.recorded_hash if isinstance(outcome, ProviderIdentityConflictError) else None
        keyed = intent.identity_hash.startswith(KEYED_PREFIX)
        return Resolution(
            key,
            "UNKNOWN",
            detail=f"identity mismatch: {without_plain_hashes(str(outcome)) if keyed else outcome}",
            identity_mismatch=True,
            found_identity_hash=None if keyed else told,
        )
    if isinstance(outcome, ProviderUnavailableError):
        return Resolution(key, "UNKNOWN", detail=f"the provider cannot tell: {outcome}")
    return Resolution(
        key, "UNKNOWN", detail=f"the lookup failed: {type(outcome).__name__}: {outcome}"
    )


def _comparable(intent: EffectView, found: LookupResult, hasher: EffectHasher) -> str | None:
    """The hash of what the provider holds, in the form of the intent's hash (None: cannot tell).

    An old intent has a plain hash, compared with the provider's own. A keyed one is compared
    with the keyed hash of the identity fields (names from the recorded request) taken from the
    payload the provider returns.
    """
    plain = found_identity(found)
    if plain is None or not intent.identity_hash.startswith(KEYED_PREFIX):
        return plain
    payload = found.result.response.get("payload") if found.result is not None else None
    try:
        names = json.loads(intent.request_json).get("identity")
    except (ValueError, AttributeError):
        return None
    if not isinstance(payload, dict) or not isinstance(names, dict):
        return None
    if not set(names) <= set(payload):
        return None
    return hasher.identity({name: payload[name] for name in names})


def found_identity(found: LookupResult) -> str | None:
    """The identity hash of the effect the provider holds, when its response names one."""
    if found.result is None:
        return None
    value = found.result.response.get("identity_hash")
    return value if isinstance(value, str) else None
