"""An unreachable broker is a typed error naming the servers, within the connect timeout (with no
outage budget: tests/unit/test_outage.py and tests/chaos/test_outages.py cover the waiting)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from agentledger.bus.consumer import KafkaEventConsumer
from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.publisher import KafkaPublisher
from agentledger.errors import ConfigurationError, UnreachableError
from agentledger.settings import CommonSettings


def closed_port() -> int:
    """A local port nobody listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A local port that accepts connections and never answers (a hung broker)."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client gives up
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = int(server.sockets[0].getsockname()[1])
    yield port
    server.close()
    await server.wait_closed()


def settings_for(port: int) -> CommonSettings:
    """Settings pointing at 127.0.0.1:port with a one-second connect timeout, no outage budget."""
    return CommonSettings(
        kafka_bootstrap=f"127.0.0.1:{port}", kafka_connect_timeout_ms=1000, outage_budget_s=0
    )


@pytest.mark.parametrize("kind", ["log", "publisher", "consumer"])
async def test_closed_port_is_unreachable(kind: str) -> None:
    """Every Kafka client fails to start with UnreachableError naming the bootstrap servers."""
    settings = settings_for(closed_port())
    client = {
        "log": lambda: KafkaEventLog(settings, transactional_id="t"),
        "publisher": lambda: KafkaPublisher(settings),
        "consumer": lambda: KafkaEventConsumer(settings, ["x"]),
    }[kind]()
    with pytest.raises(UnreachableError) as err:
        async with client:
            pass
    assert settings.kafka_bootstrap is not None
    assert settings.kafka_bootstrap in str(err.value)


async def test_silent_broker_is_unreachable_not_a_hang(silent_port: int) -> None:
    """A broker that accepts but never answers gives UnreachableError, not an endless wait."""
    settings = settings_for(silent_port)
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{silent_port}"):
        async with KafkaEventLog(settings, transactional_id="t"):
            pass


def test_missing_bootstrap_says_what_to_set() -> None:
    """Without kafka_bootstrap the error names the setting to fix."""
    with pytest.raises(ConfigurationError, match="AGENTLEDGER_KAFKA_BOOTSTRAP"):
        KafkaEventLog(CommonSettings(kafka_bootstrap=None), transactional_id="t")
