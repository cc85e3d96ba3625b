"""A Kafka that accepts connections and never answers: the projector fails fast in one line."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentledger.bus.admin import require_topics
from agentledger.errors import UnreachableError
from agentledger.settings import CommonSettings
from tests.cli_support import nonblank_lines, projector_refusal


@pytest.fixture
async def silent_port() -> AsyncIterator[int]:
    """A local port that accepts connections and never answers (a hung broker)."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    yield int(server.sockets[0].getsockname()[1])
    server.close()
    await server.wait_closed()


async def test_require_topics_on_a_silent_broker_is_unreachable(silent_port: int) -> None:
    """Checking the topics on a broker that never answers raises UnreachableError naming it."""
    settings = CommonSettings(
        kafka_bootstrap=f"127.0.0.1:{silent_port}", kafka_connect_timeout_ms=500
    )
    with pytest.raises(UnreachableError, match=f"127.0.0.1:{silent_port}"):
        await require_topics(settings, ["agentledger.steps"])


async def test_the_projector_on_a_silent_broker_exits_2_in_nonblank_lines(
    silent_port: int, tmp_path: Path
) -> None:
    """`agentledger projector` on a Kafka that never answers exits 2 with one line, no hang."""
    code, err = await projector_refusal(
        {
            "AGENTLEDGER_KAFKA_BOOTSTRAP": f"127.0.0.1:{silent_port}",
            "AGENTLEDGER_REDIS_URL": "redis://127.0.0.1:1/0",
            "AGENTLEDGER_KAFKA_CONNECT_TIMEOUT_MS": "1000",
        },
        tmp_path,
    )
    assert code == 2, err[-2000:]
    lines = nonblank_lines(err)
    assert len(lines) == 1
    assert f"127.0.0.1:{silent_port}" in lines[0]
