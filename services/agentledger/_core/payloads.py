"""Turning values into event fields: redact, encode as JSON, optionally store as a reference.

Every JSON payload and every free-text message the SDK writes goes through :class:`Payloads`,
so secrets are masked before an event is built (invariant 10). The value a step, an activity or
an effect hands back to the agent is always the *recorded* one (redacted, JSON round-tripped), so
an uninterrupted run and a resumed one see exactly the same values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

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
        text = self.inline(value)
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
