"""The run index's claims in one script answer as the pipeline they replaced (kept here).

Session 20 (DESIGN.md §13) moved the claims of runs opened together from a pipeline (EXISTS
sentinel, SET NX per run, GET of the key read along) into one Lua script. Both are run here
on the real Redis, each under its own key prefix, through the same random sequences of
batches (repeated ids inside a batch and across batches), wipes, vouches and changes of the
key read along: every answer, every value read along and every key left must be equal.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from redis.asyncio import Redis

from agentledger.leasing.run_index import Claim, RedisRunIndex
from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration


async def pipeline_claims(
    index: RedisRunIndex, run_ids: Sequence[str], along: str | None
) -> tuple[list[Claim], Any]:
    """The claims as main made them before session 20: one pipeline, in this order."""
    pipe = index._client.pipeline(transaction=False)
    pipe.exists(index.sentinel)
    for run_id in run_ids:
        pipe.set(index.key(run_id), b"1", nx=True)
    if along is not None:
        pipe.get(along)
    replies: list[Any] = await pipe.execute()
    seen = replies.pop() if along is not None else None
    if int(replies[0]) != 1:
        return ["unsure" for _ in run_ids], seen
    return ["new" if created else "known" for created in replies[1:]], seen


@pytest.fixture
async def client(ledger_settings: CommonSettings) -> AsyncIterator[Redis]:
    """A client of the test stack's Redis."""
    redis = Redis.from_url(ledger_settings.redis_url or "")
    try:
        yield redis
    finally:
        await redis.aclose()


async def keys_of(client: Redis, prefix: str) -> dict[bytes, Any]:
    """Every key under ``prefix`` (the prefix cut off) with its value."""
    found = [k async for k in client.scan_iter(match=f"{prefix}:*")]
    return {k[len(prefix) :]: await client.get(k) for k in found}


@pytest.mark.parametrize("seed", range(6))
async def test_the_claim_script_answers_as_the_pipeline(client: Redis, seed: int) -> None:
    """Random batches, wipes, vouches and values read along: the script and the reference
    pipeline give the same answers, read the same values and leave the same keys."""
    rng = random.Random(seed)
    tag = uuid.uuid4().hex[:8]
    by_script = RedisRunIndex(client, key_prefix=f"s{tag}")
    by_pipeline = RedisRunIndex(client, key_prefix=f"p{tag}")
    along_of = {id(by_script): f"s{tag}:pointer", id(by_pipeline): f"p{tag}:pointer"}
    seen: dict[int, list[Any]] = {id(by_script): [], id(by_pipeline): []}
    for index in (by_script, by_pipeline):
        index.read_along(along_of[id(index)], seen[id(index)].append)
        if seed % 2 == 0:
            await index.vouch()
    pool = [f"r{n}" for n in range(12)] + ["{braced}", "x" * 40]
    for _ in range(40):
        move = rng.random()
        if move < 0.1:  # a wipe: entries and sentinel gone, as FLUSHALL
            for index in (by_script, by_pipeline):
                for key in list(await keys_of(client, index._prefix)):
                    await client.delete(index._prefix.encode() + key)
            continue
        if move < 0.2:
            for index in (by_script, by_pipeline):
                await index.vouch()
            continue
        if move < 0.3:  # the key read along set, changed or removed
            value = rng.choice([None, b"ns-1", b"ns-2"])
            for index in (by_script, by_pipeline):
                if value is None:
                    await client.delete(along_of[id(index)])
                else:
                    await client.set(along_of[id(index)], value)
            continue
        batch = [rng.choice(pool) for _ in range(rng.randint(1, 6))]
        got = await by_script._claim_many(batch)
        want, read = await pipeline_claims(by_pipeline, batch, along_of[id(by_pipeline)])
        assert got == want, batch
        assert seen[id(by_script)].pop() == read
    assert await keys_of(client, by_script._prefix) == await keys_of(client, by_pipeline._prefix)


async def test_claims_without_a_key_read_along_answer_as_the_pipeline(client: Redis) -> None:
    """Without read_along the script reads nothing more: the same answers as the pipeline."""
    tag = uuid.uuid4().hex[:8]
    by_script = RedisRunIndex(client, key_prefix=f"s{tag}")
    by_pipeline = RedisRunIndex(client, key_prefix=f"p{tag}")
    batch = ["a", "b", "a", "c"]
    assert await by_script._claim_many(batch) == ["unsure"] * 4
    assert (await pipeline_claims(by_pipeline, batch, None))[0] == ["unsure"] * 4
    for index in (by_script, by_pipeline):
        await index.vouch()
    batch = ["a", "d", "d", "e"]
    got = await by_script._claim_many(batch)
    assert got == (await pipeline_claims(by_pipeline, batch, None))[0]
    assert got == ["known", "new", "known", "new"]
