"""An unreachable Redis is a typed error naming the endpoint, for leases and for views."""

from __future__ import annotations

import socket

import pytest

from agentledger.errors import UnreachableError
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.settings import CommonSettings
from agentledger.views.redis_store import RedisViewStore


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_lease_store_on_a_closed_port_raises_unreachable(closed_port: int) -> None:
    """Taking a lease when Redis is down says which Redis, instead of a redis-py traceback."""
    url = f"redis://127.0.0.1:{closed_port}/0"
    settings = CommonSettings(kafka_bootstrap="127.0.0.1:1", redis_url=url, outage_budget_s=0)
    store = RedisLeaseStore.from_settings(settings)
    try:
        with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}"):
            await store.acquire("run-1", "w-1", 1000)
    finally:
        await store.stop()


async def test_view_store_on_a_closed_port_raises_unreachable(closed_port: int) -> None:
    """Opening the view store when Redis is down is an UnreachableError naming the URL."""
    store = RedisViewStore.from_url(f"redis://127.0.0.1:{closed_port}/0", key_prefix="al")
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{closed_port}"):
        async with store:
            pass
