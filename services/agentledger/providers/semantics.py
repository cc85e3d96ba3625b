"""Stripe-like idempotency as pure functions, shared by the memory and the sandbox providers.

A key names one effect forever: the first call performs it, a repeat with the same identity gets
the first answer back (free text may differ), a repeat with another identity or kind is a
conflict. A compensation is an effect of kind ``<kind>.compensation`` whose identity is the object
it undoes; each object can be compensated once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pydantic import JsonValue

from agentledger.errors import (
    ProviderConflictError,
    ProviderIdentityConflictError,
    ProviderRequestError,
)
from agentledger.providers.hashing import identity_hash

COMPENSATION_SUFFIX = ".compensation"
_PREFIXES = {"payments": "pay", "emails": "em", "tickets": "tkt", "refunds": "re"}


@dataclass(frozen=True)
class StoredEffect:
    """One effect a provider performed, as it keeps it (the response is returned verbatim)."""

    id: str
    kind: str
    idempotency_key: str
    identity_hash: str
    payload: dict[str, JsonValue]
    response: dict[str, JsonValue]
    created_at: str
    compensates: str | None = field(default=None)

    def listing(self) -> dict[str, JsonValue]:
        """The object ``GET /v1/effects`` shows for this effect."""
        return {
            "id": self.id,
            "kind": self.kind,
            "idempotency_key": self.idempotency_key,
            "identity_hash": self.identity_hash,
            "payload": self.payload,
            "created_at": self.created_at,
            "compensates": self.compensates,
        }


def timestamp(moment: datetime) -> str:
    """ISO 8601 UTC with microseconds, the sandbox's ``created_at`` format."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def compensation_kind(kind: str) -> str:
    """The kind under which compensations of ``kind`` are stored and listed."""
    return f"{kind}{COMPENSATION_SUFFIX}"


def object_id(kind: str, token: str) -> str:
    """A provider object id such as ``pay_3f2a…`` for ``payments``."""
    if kind.endswith(COMPENSATION_SUFFIX):
        return f"cmp_{token}"
    return f"{_PREFIXES.get(kind, kind[:3])}_{token}"


def identity_of(
    payload: dict[str, JsonValue], identity_fields: Sequence[str] | None
) -> dict[str, JsonValue]:
    """The identity part of a flat body; every field is identity when none are declared."""
    if identity_fields is None:
        return dict(payload)
    missing = sorted(set(identity_fields) - set(payload))
    if missing:
        msg = f"identity fields {missing} are not in the request body"
        raise ProviderRequestError(msg, status=400)
    return {name: payload[name] for name in identity_fields}


def new_effect(
    *,
    kind: str,
    key: str,
    payload: dict[str, JsonValue],
    identity: dict[str, JsonValue],
    token: str,
    created_at: str,
    compensates: str | None = None,
) -> StoredEffect:
    """The effect a first call with ``key`` performs, with the object the provider answers."""
    ident_hash = identity_hash(identity)
    ref = object_id(kind, token)
    response: dict[str, JsonValue] = {
        "id": ref,
        "object": kind,
        "status": "succeeded",
        "idempotency_key": key,
        "identity_hash": ident_hash,
        "payload": payload,
        "created_at": created_at,
    }
    if compensates is not None:
        response["compensates"] = compensates
    return StoredEffect(
        id=ref,
        kind=kind,
        idempotency_key=key,
        identity_hash=ident_hash,
        payload=payload,
        response=response,
        created_at=created_at,
        compensates=compensates,
    )


def compensation_identity(target_id: str) -> dict[str, JsonValue]:
    """What defines a compensation: the object it undoes."""
    return {"compensates": target_id}


def check_replay(recorded: StoredEffect, *, kind: str, key: str, ident_hash: str) -> None:
    """Raise a conflict unless a repeat of ``key`` is the same effect as the recorded one."""
    if recorded.kind != kind:
        msg = (
            f"idempotency key {key} was used for a {recorded.kind} effect ({recorded.id}); "
            f"this request is a {kind} effect"
        )
        raise ProviderIdentityConflictError(
            msg, key=key, recorded_hash=recorded.identity_hash, new_hash=ident_hash
        )
    if recorded.identity_hash != ident_hash:
        msg = (
            f"idempotency key {key} was used with identity hash {recorded.identity_hash} "
            f"({recorded.id}); this request has identity hash {ident_hash}"
        )
        raise ProviderIdentityConflictError(
            msg, key=key, recorded_hash=recorded.identity_hash, new_hash=ident_hash
        )


def check_compensable(target: StoredEffect, existing: StoredEffect | None, key: str) -> None:
    """Raise unless ``target`` can be compensated under ``key`` (once per object)."""
    if target.compensates is not None:
        msg = f"{target.id} is itself a compensation and cannot be compensated"
        raise ProviderRequestError(msg, status=400)
    if existing is not None and existing.idempotency_key != key:
        msg = (
            f"{target.id} was already compensated by {existing.id} under key "
            f"{existing.idempotency_key}"
        )
        raise ProviderConflictError(msg, status=409)
