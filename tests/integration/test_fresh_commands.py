"""A rebuild's writes as plain commands (views/fresh_commands.py) against WRITE_FRESH, on Redis."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import NamedTuple

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from agentledger.events import EventCodec, RunEvent
from agentledger.projector.testing import sample_run
from agentledger.views.fresh_commands import fresh_commands, plain_commands_ok, send_packed
from agentledger.views.keys import STATUSES
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import FreshRun, IndexUpdate
from tests.conftest import StackUnderTest

pytestmark = pytest.mark.integration

DAY = 86_400_000
NOW = 10 * DAY
#: events a generated run may have parked (real events: the parked hash holds their encoding)
POOL: list[RunEvent] = sample_run("pool", steps=3)

_text = st.binary(min_size=0, max_size=90)  # values on both sides of 64 bytes
_fields = st.dictionaries(st.sampled_from(["a", "b", "status", "budget", "_parked"]), _text)


@st.composite
def fresh_runs(draw: st.DrawFn) -> list[FreshRun]:
    """Runs of a rebuild in their stored form: any statuses (a run unindexed too), retention
    kept or expired, empty and full hashes, parked events, open intents."""
    ids = draw(st.lists(st.sampled_from([f"r{n}" for n in range(12)]), unique=True, max_size=8))
    runs = []
    for run_id in ids:
        status = draw(st.sampled_from(STATUSES))
        indexed = draw(st.booleans())
        intents = draw(st.dictionaries(st.sampled_from(["k0", "k1", "k2"]), st.integers(0, NOW)))
        parked = draw(st.lists(st.sampled_from(POOL), unique_by=lambda e: e.event_id, max_size=3))
        runs.append(
            FreshRun(
                run_id=run_id,
                fields=draw(_fields) | {"run_id": run_id.encode()},
                steps=draw(st.dictionaries(st.sampled_from(["0", "1", "2"]), _text)),
                effects=draw(st.dictionaries(st.sampled_from(["k0", "k1"]), _text)),
                parked=parked,
                status=status,
                ended_at=draw(st.integers(0, NOW)),
                index=IndexUpdate(
                    run_id=run_id,
                    status=status if indexed else None,
                    updated_at=draw(st.integers(0, NOW)),
                    drop_statuses=STATUSES,
                    open_intents=intents,
                    parked=draw(st.booleans()),
                ),
            )
        )
    return runs


class OnRedis(NamedTuple):
    """A client on the session's Redis and this test's key prefix."""

    client: Redis
    prefix: str


@pytest_asyncio.fixture(loop_scope="session")
async def on_redis(stack: StackUnderTest) -> AsyncIterator[OnRedis]:
    """A client and a key prefix of its own; the prefix's keys are removed after the test."""
    client = Redis.from_url(stack.redis_url)
    prefix = f"t{uuid.uuid4().hex[:12]}"
    try:
        yield OnRedis(client, prefix)
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


def _stores(on: OnRedis, *, partitions: int | None) -> tuple[RedisViewStore, RedisViewStore]:
    """(plain commands, WRITE_FRESH) stores with a 1-day retention at NOW."""
    made = [
        RedisViewStore(
            on.client,
            key_prefix=on.prefix,
            retention_ms=DAY,
            clock=lambda: NOW,
            partitions=partitions,
            sharded=partitions is not None,
            plain_commands=plain,
        )
        for plain in (True, False)
    ]
    return made[0], made[1]


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(fresh_runs(), st.sampled_from([None, 4]))
async def test_plain_commands_store_what_write_fresh_stores(
    on_redis: OnRedis, runs: list[FreshRun], partitions: int | None
) -> None:
    """Generated slices written by plain commands and by the WRITE_FRESH script give the same
    keys, values, TTLs and index entries (plain and sharded namespaces), and the same runs
    past retention."""
    plain, script = _stores(on_redis, partitions=partitions)
    ns_plain, ns_script = await plain.create_namespace(), await script.create_namespace()
    plain_outcome = await plain.write_fresh_stored(ns_plain, runs)
    script_outcome = await script.write_fresh_stored(ns_script, runs)
    assert plain_outcome.expired == script_outcome.expired
    left = {k.replace(ns_plain, "NS"): v for k, v in (await plain.snapshot(ns_plain)).items()}
    right = {k.replace(ns_script, "NS"): v for k, v in (await script.snapshot(ns_script)).items()}
    assert left == right
    await plain.drop_namespace(ns_plain)
    await script.drop_namespace(ns_script)


async def test_a_rebuilds_writes_on_one_redis_call_no_script(on_redis: OnRedis) -> None:
    """On one Redis (not a cluster) a store writes a rebuild's runs with plain commands: no
    EVALSHA reaches the server for them."""
    client = on_redis.client
    store = RedisViewStore(client, key_prefix=on_redis.prefix)
    assert plain_commands_ok(client)
    namespace = await store.create_namespace()
    run = FreshRun(
        "r0", {"run_id": b"r0"}, {}, {}, [], "running", NOW, IndexUpdate("r0", "running")
    )
    before = await _evalsha_calls(client)
    await store.write_fresh_stored(namespace, [run])
    assert await _evalsha_calls(client) == before
    assert await client.hgetall(store.keys.space(namespace).run("r0", "run")) == {b"run_id": b"r0"}


async def _evalsha_calls(client: Redis) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def test_an_error_reply_is_raised_and_the_connection_stays_usable(
    on_redis: OnRedis,
) -> None:
    """A command Redis refuses (a hash written over a key of another type) fails the write with
    Redis's error, after the commands around it were answered; the pool's next command works."""
    client = on_redis.client
    store = RedisViewStore(client, key_prefix=on_redis.prefix)
    space = store.keys.space(await store.create_namespace())
    await client.set(space.run("r1", "run"), b"not a hash")
    runs = [
        FreshRun(r, {"run_id": r.encode()}, {}, {}, [], "running", NOW, IndexUpdate(r, "running"))
        for r in ("r0", "r1", "r2")
    ]
    packed = fresh_commands(space, runs, codec=EventCodec(), retention_ms=None, now=NOW)
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await send_packed(client, packed.payload, packed.replies)
    assert await client.ping()
    assert await client.hget(space.run("r2", "run"), "run_id") == b"r2"
    assert await client.zscore(space.status_index("running"), "r2") == 0
