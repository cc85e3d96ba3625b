"""Canonical JSON and the sha256 hashes that identify an effect, its payload and a response.

These functions are the contract between the SDK, the providers and the reconciler: the SDK
records ``identity_hash`` and ``payload_hash`` in ``EffectIntended``; the sandbox provider
computes the same ``identity_hash`` from the identity fields it receives, so a 409 names hashes a
person can compare with the event log. Never change the encoding: recorded hashes would stop
matching.

Canonical JSON is ``json.dumps`` with sorted keys, no whitespace, UTF-8 (non-ASCII kept as is),
no NaN or infinity, string keys only. Strings are hashed as given (no Unicode normalisation) and
``1`` and ``1.0`` are different values: send money as integer minor units or decimal strings.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping

from agentledger.errors import CanonicalJsonError

_MAX_DEPTH = 64


def _check(value: object, path: str, depth: int) -> None:
    """Raise CanonicalJsonError unless ``value`` is plain JSON with string keys."""
    if depth > _MAX_DEPTH:
        raise CanonicalJsonError(f"nested deeper than {_MAX_DEPTH} levels", path=path)
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalJsonError(f"{value!r} has no JSON form", path=path)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalJsonError(f"key {key!r} is not a string", path=path)
            _check(item, f"{path}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", depth + 1)
        return
    raise CanonicalJsonError(f"{type(value).__name__} is not a JSON type", path=path)


def canonical_json(value: object) -> bytes:
    """The one byte encoding of a JSON value: sorted keys, no whitespace, UTF-8."""
    _check(value, "$", 0)
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def sha256_hex(value: object) -> str:
    """Lower-case hex sha256 of the canonical JSON of ``value``."""
    return hashlib.sha256(canonical_json(value)).hexdigest()


def identity_hash(identity: Mapping[str, object]) -> str:
    """Hash of the identity fields alone: what makes two calls the same effect."""
    return sha256_hex(identity)


def payload_hash(identity: Mapping[str, object], free_text: Mapping[str, object]) -> str:
    """Hash of the whole payload, identity and free text kept apart so they cannot alias."""
    return sha256_hex({"free_text": free_text, "identity": identity})


def response_hash(response: object) -> str:
    """Hash of a provider's response object, as recorded next to its external reference."""
    return sha256_hex(response)
