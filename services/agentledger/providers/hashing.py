"""Canonical JSON and the sha256 hashes that identify an effect, its payload and a response.

These functions are the contract between the SDK, the providers and the reconciler: the SDK
records ``identity_hash`` and ``payload_hash`` in ``EffectIntended``; the sandbox provider
computes the same ``identity_hash`` from the identity fields it receives, so a 409 names hashes a
person can compare. The event log records *keyed* hashes (:class:`EffectHasher`, HMAC under
the deployment's hash key) so that it does not hold an unsalted hash of unredacted data; the
provider's own plain hashes never reach it. Never change the encoding: recorded hashes would
stop matching.

Canonical JSON is ``json.dumps`` with sorted keys, no whitespace, UTF-8 (non-ASCII kept as is),
no NaN or infinity, string keys only. Strings are hashed as given (no Unicode normalisation) and
``1`` and ``1.0`` are different values: send money as integer minor units or decimal strings.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import json.encoder
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentledger.errors import CanonicalJsonError
from agentledger.settings import DEFAULT_HASH_KEY

_MAX_DEPTH = 64


def _plain_exact(value: object, depth: int) -> bool:
    """:func:`_plain` without a call per scalar, for values of exactly the built-in types (the
    common case); anything else it meets (a subclass, a tuple, a non-string key) is left to
    :func:`_plain`. It is True only where :func:`_plain` is: a False costs speed, not bytes,
    as :func:`_check` then walks the value with paths."""
    if depth > _MAX_DEPTH:
        return False
    if type(value) is dict:
        if all(type(key) is str for key in value):
            return _plain_items(value.values(), depth + 1)
    elif type(value) is list:
        return _plain_items(value, depth + 1)
    return _plain(value, depth)


def _plain_items(items: Iterable[object], depth: int) -> bool:
    """True when every one of ``items`` (at ``depth``) passes :func:`_plain_exact`."""
    for item in items:
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            if depth > _MAX_DEPTH:
                return False
        elif not _plain_exact(item, depth):
            return False
    return True


def _plain(value: object, depth: int) -> bool:
    """True when ``value`` is plain JSON with string keys (no paths built: the common case)."""
    if depth > _MAX_DEPTH:
        return False
    if value is None or isinstance(value, str | bool | int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v, depth + 1) for v in value)
    return False


def _check(value: object, path: str, depth: int) -> None:
    """Raise CanonicalJsonError unless ``value`` is plain JSON with string keys."""
    if depth == 0 and _plain_exact(value, 0):
        return
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


#: ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
#: allow_nan=False)``, with the encoder made once: ``json.dumps`` with any argument but the
#: defaults builds a new ``JSONEncoder`` at every call, and it keeps no state between calls.
_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)
#: Its C encoder, made once too (``JSONEncoder.encode`` makes one a call), without the
#: circular-reference marks: :func:`_check` has already refused anything nested deeper than
#: ``_MAX_DEPTH``, so a value that reaches it is a finite tree. None without the C module.
_make_c_encoder: Callable[..., Any] | None = getattr(json.encoder, "c_make_encoder", None)
_C_CANONICAL = (
    None
    if _make_c_encoder is None
    else _make_c_encoder(
        None, _CANONICAL.default, json.encoder.encode_basestring, None, ":", ",", True, False,
        False,
    )
)  # fmt: skip


def canonical_json(value: object) -> bytes:
    """The one byte encoding of a JSON value: sorted keys, no whitespace, UTF-8."""
    _check(value, "$", 0)
    return _encoded(value)


def _encoded(value: object) -> bytes:
    """The canonical bytes of ``value``, which :func:`_check` accepted."""
    if _C_CANONICAL is None or isinstance(value, str):
        return _CANONICAL.encode(value).encode("utf-8")
    return "".join(_C_CANONICAL(value, 0)).encode("utf-8")


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


# --- the hashes the event log records (keyed) ---------------------------------------------

#: How a keyed hash in the log starts. Hashes without it were written before keyed hashes
#: (plain sha256 of the canonical JSON) and are still checked as such.
KEYED_PREFIX = "hmac-sha256:"

_PLAIN_SHA256 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


class EffectHasher:
    """The identity and payload hashes the SDK records in ``EffectIntended`` (finding 9 of
    issue 17): HMAC-SHA256 under a deployment secret, so a hash of an identity that holds a card
    number or an address cannot be reversed by hashing guesses, as a plain sha256 can.

    Two calls are the same effect when their keyed identity hashes are equal: idempotency works
    as before. Events written before carry plain sha256 hashes; :meth:`identity_matches` and
    :meth:`payload_matches` accept those too, so old runs resume. Never change the encoding.
    """

    def __init__(self, key: str | bytes = DEFAULT_HASH_KEY) -> None:
        self._key = key.encode() if isinstance(key, str) else key
        # the key's inner and outer pads hashed once; each hash continues a copy of them
        # (``hmac.new`` pads and hashes the key again at every call)
        self._keyed = hmac.new(self._key, digestmod=hashlib.sha256)
        # intent()'s shortcut is this class's hashing: a subclass that hashes otherwise (an
        # older plain sha256, in tests) is asked through its own two methods
        kind = type(self)
        self._own_hashes = all(
            getattr(kind, name) is getattr(EffectHasher, name)
            for name in ("identity", "payload", "_mac", "_mac_of")
        )

    def _mac(self, value: object) -> str:
        return self._mac_of(canonical_json(value))

    def _mac_of(self, data: bytes) -> str:
        mac = self._keyed.copy()
        mac.update(data)
        return KEYED_PREFIX + mac.hexdigest()

    def intent(
        self, identity: Mapping[str, object], free_text: Mapping[str, object]
    ) -> tuple[str, str]:
        """``(self.identity(identity), self.payload(identity, free_text))``, the identity's
        canonical JSON made once: when both are plain JSON one level down (as they are inside
        the payload's object), the payload's canonical JSON is its two parts' bytes between
        its two keys, in their sorted order; anything else is hashed by the two calls."""
        if self._own_hashes and _plain_exact(identity, 1) and _plain_exact(free_text, 1):
            ident = _encoded(identity)
            payload = b'{"free_text":' + _encoded(free_text) + b',"identity":' + ident + b"}"
            return self._mac_of(ident), self._mac_of(payload)
        return self.identity(identity), self.payload(identity, free_text)

    def identity(self, identity: Mapping[str, object]) -> str:
        """The keyed hash of the identity fields."""
        return self._mac(identity)

    def payload(self, identity: Mapping[str, object], free_text: Mapping[str, object]) -> str:
        """The keyed hash of the whole payload (identity and free text kept apart)."""
        return self._mac({"free_text": free_text, "identity": identity})

    def identity_matches(self, recorded: str, identity: Mapping[str, object]) -> bool:
        """True when ``recorded`` (keyed, or plain from an older event) hashes ``identity``."""
        if recorded.startswith(KEYED_PREFIX):
            return hmac.compare_digest(recorded, self.identity(identity))
        return hmac.compare_digest(recorded, identity_hash(identity))

    def payload_matches(
        self, recorded: str, identity: Mapping[str, object], free_text: Mapping[str, object]
    ) -> bool:
        """True when ``recorded`` (keyed, or plain from an older event) hashes the payload."""
        if recorded.startswith(KEYED_PREFIX):
            return hmac.compare_digest(recorded, self.payload(identity, free_text))
        return hmac.compare_digest(recorded, payload_hash(identity, free_text))


def without_plain_hashes(text: str) -> str:
    """``text`` with plain sha256 hex digests cut out: a provider's conflict message names its
    own unkeyed identity hashes, which must not reach the log."""
    return _PLAIN_SHA256.sub("[sha256]", text)
