"""Turning values into event fields: redact, encode as JSON, optionally store as a reference.

Every JSON payload and every free-text message the SDK writes goes through :class:`Payloads`,
so secrets are masked before an event is built (invariant 10). The value a step, an activity or
an effect hands back to the agent is always the *recorded* one (redacted, JSON round-tripped), so
an uninterrupted run and a resumed one see exactly the same values.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final

from agentledger._core.blobs import BlobRef, BlobStore
from agentledger.errors import PayloadError
from agentledger.providers.hashing import EffectHasher
from agentledger.redaction import DEFAULT_REDACTOR, Redactor

MAX_TEXT = 4000


@dataclass(frozen=True)
class Encoded:
    """A payload as event fields: inline JSON, or ``"null"`` plus a reference."""

    json: str
    ref_uri: str | None = None
    ref_hash: str | None = None

    @property
    def size(self) -> int:
        """Bytes this payload adds to the event."""
        return len(self.json.encode()) + len(self.ref_uri or "") + len(self.ref_hash or "")


@dataclass(frozen=True)
class Recorded:
    """A payload as recorded (:meth:`Payloads.record`): its event fields, the redacted value
    they encode, and a copy of it equal to what :meth:`Payloads.decode` gives back from them
    (:data:`NOT_PLAIN` when the value is not vouched for: then it is decoded)."""

    encoded: Encoded
    redacted: Any
    copy: Any


#: How deep :func:`plain_copy` walks before it leaves a value to the JSON text's parse.
PLAIN_COPY_DEPTH = 64


class _NotPlain:
    """What :func:`plain_copy` returns for a value it does not vouch for."""


NOT_PLAIN: Final = _NotPlain()


def plain_copy(value: Any, depth: int = 0) -> Any:
    """A copy of ``value`` equal to ``loads(dumps(value))``, of the same types, sharing no dict
    or list with it, when ``value`` is plain JSON of exactly the built-in types: dicts with
    ``str`` keys, lists, ``str``, ``int``, finite ``float``, ``bool``, None (JSON text of those
    reads back as the same values and types). :data:`NOT_PLAIN` for anything else (a tuple, a
    subclass, a key that is not a ``str``, nesting past :data:`PLAIN_COPY_DEPTH`), which is
    then read back from its text as before."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return value if math.isfinite(value) else NOT_PLAIN
    if depth >= PLAIN_COPY_DEPTH:
        return NOT_PLAIN
    if kind is dict:
        return _plain_dict(value, depth + 1)
    if kind is list:
        return _plain_list(value, depth + 1)
    return NOT_PLAIN


def _plain_dict(value: dict[Any, Any], depth: int) -> Any:
    """:func:`plain_copy` of a dict whose items are at ``depth``."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        copied = plain_copy(item, depth)
        if type(key) is not str or copied is NOT_PLAIN:
            return NOT_PLAIN
        out[key] = copied
    return out


def _plain_list(value: list[Any], depth: int) -> Any:
    """:func:`plain_copy` of a list whose items are at ``depth``."""
    items: list[Any] = []
    for item in value:
        copied = plain_copy(item, depth)
        if copied is NOT_PLAIN:
            return NOT_PLAIN
        items.append(copied)
    return items


#: ``json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)``, with the
#: encoder made once instead of at every call (it keeps no state between calls).
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def dumps(value: Any) -> str:
    """Compact JSON (key order kept, UTF-8 kept); PayloadError for anything that is not JSON."""
    try:
        return _ENCODE(value)
    except (TypeError, ValueError) as e:
        raise PayloadError(f"value cannot be recorded as JSON: {e}") from e


def loads(text: str) -> Any:
    """The value of recorded inline JSON; PayloadError when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise PayloadError(f"recorded payload is not JSON: {e}") from e


class Payloads:
    """Redacts and encodes payloads; payloads above ``threshold`` bytes go to ``blobs``."""

    def __init__(
        self,
        redactor: Redactor = DEFAULT_REDACTOR,
        *,
        blobs: BlobStore | None = None,
        threshold: int | None = None,
        hasher: EffectHasher | None = None,
    ) -> None:
        self.redactor = redactor
        self.hasher = hasher or EffectHasher()
        self.blobs = blobs
        self.threshold = threshold

    def inline(self, value: Any) -> str:
        """Redacted compact JSON of ``value``, always inline (inputs, requests, pause payloads)."""
        return dumps(self.redactor.json(value))

    async def encode(self, value: Any) -> Encoded:
        """Redacted JSON of ``value``; stored as a reference when large and a store is set."""
        return await self._stored(self.inline(value))

    async def record(self, value: Any) -> Recorded:
        """:meth:`encode` of ``value``, keeping the redacted value and, for an inline payload
        of plain JSON, a copy of it (:func:`plain_copy`) that :meth:`value_of` hands back
        instead of parsing the recorded text again."""
        redacted = self.redactor.json(value)
        encoded = await self._stored(dumps(redacted))
        copied = plain_copy(redacted) if encoded.ref_uri is None else NOT_PLAIN
        return Recorded(encoded, redacted, copied)

    async def value_of(self, recorded: Recorded) -> Any:
        """What :meth:`decode` gives back from ``recorded``'s fields: its copy when it has one
        (equal, of the same types), else the decoded fields."""
        if recorded.copy is not NOT_PLAIN:
            return recorded.copy
        encoded = recorded.encoded
        return await self.decode(encoded.json, encoded.ref_uri, encoded.ref_hash)

    async def _stored(self, text: str) -> Encoded:
        """``text`` inline, or stored as a reference when large and a store is set."""
        if self.blobs is not None and self.threshold is not None:
            data = text.encode()
            if len(data) > self.threshold:
                ref = await self.blobs.put(data)
                return Encoded("null", ref.uri, ref.sha256)
        return Encoded(text)

    async def decode(self, text: str, ref_uri: str | None, ref_hash: str | None) -> Any:
        """The recorded value: parsed inline JSON, or the referenced blob, verified."""
        if ref_uri is not None:
            if self.blobs is None or ref_hash is None:
                raise PayloadError(f"payload stored at {ref_uri} but no blob store is configured")
            text = (await self.blobs.get(BlobRef(ref_uri, ref_hash))).decode()
        return loads(text)

    def text(self, message: str) -> str:
        """A redacted, length-capped message (error texts, reasons, details)."""
        masked = self.redactor.text(message)
        if len(masked) > MAX_TEXT:
            return masked[:MAX_TEXT] + f"… ({len(masked) - MAX_TEXT} more characters)"
        return masked
