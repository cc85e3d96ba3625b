"""Redis reply helpers of the view store, and the normalized snapshot ``views verify`` compares."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import redis.asyncio as aioredis

from agentledger.views.keys import SpaceKeys
from agentledger.views.store import SnapshotValue

SCAN_COUNT = 1000
CHUNK = 500


async def scan_chunks(client: aioredis.Redis, pattern: str) -> AsyncIterator[list[bytes]]:
    """Keys matching ``pattern``, in lists of up to ``CHUNK``."""
    chunk: list[bytes] = []
    async for key in client.scan_iter(match=pattern, count=SCAN_COUNT):
        chunk.append(key)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


async def snapshot_keys(
    client: aioredis.Redis, space: SpaceKeys, names: list[str]
) -> dict[str, SnapshotValue]:
    """Type, normalized content and "has a TTL" of each key, by name relative to the namespace.

    Scores of the parked index are wall-clock times, so only its members are kept.
    """
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.type(name)
        pipe.pttl(name)
    meta: list[Any] = await pipe.execute()
    pipe = client.pipeline(transaction=False)
    for i, name in enumerate(names):
        kind = text(meta[2 * i])
        if kind == "hash":
            pipe.hgetall(name)
        elif kind == "zset":
            pipe.zrange(name, 0, -1, withscores=True)
        else:
            pipe.get(name)
    values: list[Any] = await pipe.execute()
    out: dict[str, SnapshotValue] = {}
    for i, name in enumerate(names):
        kind = text(meta[2 * i])
        has_ttl = int(meta[2 * i + 1]) > 0
        value = values[i]
        content: object
        if kind == "hash":
            content = {text(k): v for k, v in value.items()}
        elif kind == "zset":
            scored = [(text(m), float(s)) for m, s in value]
            parked = space.is_parked_index(name)
            content = sorted(m for m, _ in scored) if parked else sorted(scored)
        else:
            content = value
        out[space.relative(name)] = (kind, content, has_ttl)
    return out


def text(value: object) -> str:
    """A Redis reply item as text (replies are bytes: the client does not decode)."""
    return value.decode() if isinstance(value, bytes) else str(value)


def texts(values: object) -> list[str]:
    """A Redis list reply as texts."""
    return [text(v) for v in cast(list[object], values)]


def pairs(flat: object) -> dict[bytes, bytes]:
    """A flat [field, value, …] reply (HGETALL inside Lua) as a dict."""
    items = cast(list[bytes], flat)
    return dict(zip(items[::2], items[1::2], strict=True))
