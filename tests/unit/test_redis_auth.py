"""A Redis that refuses the login is a configuration error naming AGENTLEDGER_REDIS_URL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from agentledger.errors import ConfigurationError
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.settings import CommonSettings
from agentledger.views.redis_store import RedisViewStore


@pytest.fixture
async def refusing_redis() -> AsyncIterator[int]:
    """A local server that answers every RESP command as a Redis with a password would."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(4096):
            writer.write(b"-WRONGPASS invalid username-password pair or user is disabled.\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    yield int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()


async def test_view_store_with_a_wrong_password_names_the_setting(refusing_redis: int) -> None:
    """Opening the views on a Redis that refuses the password says so, not "is it running?"."""
    url = f"redis://:wrong@127.0.0.1:{refusing_redis}/0"
    store = RedisViewStore.from_url(url, key_prefix="al")
    with pytest.raises(ConfigurationError, match="AGENTLEDGER_REDIS_URL") as caught:
        async with store:
            pass
    assert "running" not in str(caught.value)
    assert "wrong" not in str(caught.value)  # the password is never printed


async def test_lease_store_with_a_wrong_password_names_the_setting(refusing_redis: int) -> None:
    """Taking a lease on a Redis that refuses the password is a configuration error."""
    url = f"redis://:wrong@127.0.0.1:{refusing_redis}/0"
    store = RedisLeaseStore.from_settings(
        CommonSettings(kafka_bootstrap="127.0.0.1:1", redis_url=url)
    )
    try:
        with pytest.raises(ConfigurationError, match="AGENTLEDGER_REDIS_URL"):
            await store.acquire("run-1", "w-1", 1000)
    finally:
        await store.stop()
