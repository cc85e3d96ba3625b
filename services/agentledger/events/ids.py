"""Event ids for the worker's hot path: the hex of a random version-4 UUID, made cheaply.

``uuid.uuid4().hex`` (the models' default factory) builds a UUID object for a string; and
pydantic's call of a default factory costs more than the rest of an event's validation. The
run writer passes an id made here instead: the same 32 hex digits of an RFC 4122 version-4
UUID (122 random bits from ``os.urandom``), without the object.
"""

from __future__ import annotations

import os

#: The bits of a version-4 UUID that are not random: the version (4) and the variant (10).
_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_SET = (0x4000 << 64) | (0x8000 << 48)


def fresh_event_id() -> str:
    """A fresh event id, as ``uuid.uuid4().hex`` would make it."""
    n = int.from_bytes(os.urandom(16), "big")
    return f"{n & _CLEAR | _SET:032x}"
