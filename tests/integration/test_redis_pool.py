"""The worker's one Redis pool on the real stack: callers wait, errors are typed."""

from __future__ import annotations

import asyncio

import pytest
import redis.exceptions
from redis.asyncio import Redis

from agentledger._core.ports import WorkerPorts
from agentledger._core.settings import WorkerSettings
from agentledger.bus.port import Position
from agentledger.errors import UnreachableError
from agentledger.redisclient import pooled_client, redis_client
from agentledger.settings import CommonSettings
from agentledger.views.redis_store import RedisViewStore

pytestmark = pytest.mark.integration

CONCURRENT = 200


def small_pool(base: CommonSettings, connections: int) -> WorkerSettings:
    """Worker settings on the test's topics and keys with a pool of ``connections``."""
    return WorkerSettings(
        **base.model_dump(),
        transactional_id=f"pool-{base.key_prefix}",
        redis_max_connections=connections,
        redis_pool_wait_s=30.0,
    )


async def test_200_concurrent_lease_and_view_calls_share_4_connections(
    ledger_settings: CommonSettings,
) -> None:
    """200 concurrent runs' lease and view calls through WorkerPorts succeed on 4 connections."""
    settings = small_pool(ledger_settings, 4)
    async with WorkerPorts(settings) as ports:
        views = ports.views
        assert views is not None

        async def one_run(i: int) -> tuple[int, bool, list[str]]:
            lease = await ports.leases.acquire(f"run-{i}", "w-1", 10_000)
            caught_up = await views.progress([Position("t", 0, 1)])
            running = await views.runs_by_status("running")
            lease = await ports.leases.renew(lease, 10_000)
            await ports.leases.release(lease)
            return lease.fence, caught_up, running

        results = await asyncio.gather(*(one_run(i) for i in range(CONCURRENT)))
    assert results == [(1, False, [])] * CONCURRENT


async def test_worker_ports_stop_twice_and_leave_a_borrowed_view_store_open(
    ledger_settings: CommonSettings,
) -> None:
    """Stopping the ports twice is harmless, and a views store passed in still works afterwards."""
    settings = small_pool(ledger_settings, 2)
    assert settings.redis_url is not None
    async with RedisViewStore.from_url(settings.redis_url, key_prefix=settings.key_prefix) as own:
        ports = WorkerPorts(settings, views=own)
        async with ports:
            assert ports.views is own
            await ports.leases.acquire("run-1", "w-1", 10_000)
        await ports.stop()
        assert await own.runs_by_status("running") == []


async def test_an_exhausted_pool_whose_wait_runs_out_raises_unreachable(
    ledger_settings: CommonSettings,
) -> None:
    """A view call finding the only pooled connection busy past the wait is an UnreachableError."""
    assert ledger_settings.redis_url is not None
    client = pooled_client(ledger_settings.redis_url, max_connections=1, wait_s=0.05)
    store = RedisViewStore(client, key_prefix=ledger_settings.key_prefix, url="redis-under-test")
    try:
        held = await client.connection_pool.get_connection()
        try:
            with pytest.raises(UnreachableError, match="redis-under-test") as caught:
                await store.runs_by_status("running")
            assert isinstance(caught.value.__cause__, redis.exceptions.ConnectionError)
        finally:
            await client.connection_pool.release(held)
        assert await store.runs_by_status("running") == []
    finally:
        await client.aclose()


async def test_a_redis_command_error_is_not_taken_for_an_unreachable_redis(
    ledger_settings: CommonSettings,
) -> None:
    """A reply error (WRONGTYPE) still surfaces as redis' ResponseError, not as UnreachableError."""
    assert ledger_settings.redis_url is not None
    client = pooled_client(ledger_settings.redis_url, max_connections=2, wait_s=5.0)
    store = RedisViewStore(client, key_prefix=ledger_settings.key_prefix)
    try:
        await client.set(store.keys.space("v1").progress(), "not a hash")
        with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
            await store.read_progress("v1")
    finally:
        await client.aclose()


def _connected(client: Redis) -> int:
    """How many of ``client``'s pooled connections hold a socket."""
    pool = client.connection_pool
    return sum(
        1
        for c in [*pool._get_free_connections(), *pool._get_in_use_connections()]
        if c.is_connected
    )


@pytest.mark.parametrize("make", ["redis_client", "pooled_client"])
async def test_a_client_used_after_its_close_leaves_no_connection_open(
    ledger_settings: CommonSettings, make: str
) -> None:
    """A task that outlives its client's close still gets its answer, and the connection it
    opened is closed again when released (not left open for the collector to report)."""
    assert ledger_settings.redis_url is not None
    url = ledger_settings.redis_url
    client = redis_client(url, settings=None) if make == "redis_client" else pooled_client(url)
    assert await client.ping()
    await client.aclose()
    assert _connected(client) == 0
    assert await client.ping()  # a straggler's command after the close
    assert _connected(client) == 0
    await client.aclose()
