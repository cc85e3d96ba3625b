"""The run index contract: the in-memory and the Redis index say new only while they are whole."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentledger.leasing.run_index import MemoryRunIndex, RedisRunIndex, RunIndex
from agentledger.settings import CommonSettings


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> CommonSettings | None:
    """None for the in-memory index, else this test's settings on the real Redis."""
    if request.param == "memory":
        return None
    settings: CommonSettings = request.getfixturevalue("ledger_settings")
    return settings


@pytest.fixture
async def index(backend: CommonSettings | None) -> AsyncIterator[RunIndex]:
    """A vouched-for index (memory, or Redis under this test's prefix)."""
    if backend is None:
        yield MemoryRunIndex()
        return
    settings = backend
    client = Redis.from_url(settings.redis_url or "")
    try:
        redis_index = RedisRunIndex(client, key_prefix=settings.key_prefix)
        await redis_index.vouch()
        yield redis_index
    finally:
        await client.aclose()


async def flush(index: RunIndex) -> None:
    """Wipe the index as FLUSHALL would (its entries and its sentinel)."""
    if isinstance(index, MemoryRunIndex):
        index.flush()
        return
    assert isinstance(index, RedisRunIndex)
    client = index._client
    keys = [k async for k in client.scan_iter(match=f"{index._prefix}:*")]
    if keys:
        await client.delete(*keys)


async def test_a_first_claim_is_new_and_every_later_one_known(index: RunIndex) -> None:
    """A whole index says new once per run id, then known, whoever claims."""
    run = f"r-{uuid.uuid4().hex[:8]}"
    assert await index.claim(run) == "new"
    assert await index.claim(run) == "known"
    assert await index.claim(run + "-other") == "new"


async def test_a_wiped_index_is_unsure_until_vouched_for(index: RunIndex) -> None:
    """After a wipe every claim is unsure (read the log), even of ids claimed before; vouching
    makes it whole again and claims made while unsure stay recorded."""
    run, later = f"r-{uuid.uuid4().hex[:8]}", f"l-{uuid.uuid4().hex[:8]}"
    await index.claim(run)
    await flush(index)
    assert await index.claim(run) == "unsure"
    assert await index.claim(later) == "unsure"
    await index.vouch()
    assert await index.claim(later) == "known"
    assert await index.claim(f"n-{uuid.uuid4().hex[:8]}") == "new"


async def test_claims_made_together_each_get_their_own_answer(index: RunIndex) -> None:
    """Run ids claimed at once (one pipeline on Redis): each is new once, a repeat in the same
    batch and an id claimed earlier are known."""
    runs = [f"r-{uuid.uuid4().hex[:8]}" for _ in range(10)]
    assert await index.claim(runs[0]) == "new"
    answers = await asyncio.gather(*(index.claim(r) for r in [*runs, runs[1]]))
    assert answers == ["known", "new", *["new"] * 8, "known"]
    await flush(index)
    assert await asyncio.gather(*(index.claim(r) for r in runs[:3])) == ["unsure"] * 3
