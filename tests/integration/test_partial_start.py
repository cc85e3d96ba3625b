"""Opening a composition that fails half-way closes what it had already opened."""

from __future__ import annotations

import socket

import pytest

from agentledger._core.ports import Ports
from agentledger.errors import UnreachableError
from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def _connected(ports: Ports) -> int:
    """How many of the Ports' pooled Redis connections still hold a socket."""
    pool = ports.redis.connection_pool
    connections = [*pool._get_free_connections(), *pool._get_in_use_connections()]
    return sum(1 for c in connections if c.is_connected)


async def test_ports_whose_kafka_does_not_start_leave_no_redis_connection_open(
    ledger_settings: CommonSettings,
) -> None:
    """Redis is checked (a pooled connection opens) while Kafka is unreachable: entering fails
    with UnreachableError, and the Redis connection is closed, not left open (the collector
    would report it as an unclosed connection, a ResourceWarning, in whatever test runs then)."""
    settings = ledger_settings.model_copy(
        update={
            "kafka_bootstrap": f"127.0.0.1:{_closed_port()}",
            "kafka_connect_timeout_ms": 500,
            "outage_budget_s": 0.0,
        }
    )
    ports = Ports(settings, transactional_id="partial-start")
    with pytest.raises(UnreachableError, match="Kafka"):
        async with ports:
            pytest.fail("Ports must not open without Kafka")
    pool = ports.redis.connection_pool
    assert [*pool._get_free_connections(), *pool._get_in_use_connections()]  # Redis was checked
    assert _connected(ports) == 0
