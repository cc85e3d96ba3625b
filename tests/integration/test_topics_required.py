"""Missing topics fail fast, in one line saying `agentledger topics ensure` (SDK, projector)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path

import pytest

from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import ConfigurationError
from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration


def without_topics(settings: CommonSettings) -> CommonSettings:
    """The test's endpoints under a topic prefix nobody ensured."""
    return settings.model_copy(update={"topic_prefix": f"missing-{uuid.uuid4().hex[:8]}."})


async def test_an_event_log_without_topics_says_topics_ensure(
    ledger_settings: CommonSettings,
) -> None:
    """Opening a writer on a prefix with no topics raises ConfigurationError naming the fix."""
    settings = without_topics(ledger_settings)
    with pytest.raises(ConfigurationError, match="agentledger topics ensure") as caught:
        async with KafkaEventLog(settings, transactional_id="missing-topics"):
            pass
    assert settings.topic_prefix in str(caught.value)


async def test_the_projector_without_topics_exits_2_in_one_line(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """`agentledger projector` on a prefix with no topics refuses to start (not ready, 0 parts)."""
    settings = without_topics(ledger_settings)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(
        AGENTLEDGER_KAFKA_BOOTSTRAP=str(settings.kafka_bootstrap),
        AGENTLEDGER_REDIS_URL=str(settings.redis_url),
        AGENTLEDGER_TOPIC_PREFIX=settings.topic_prefix,
        AGENTLEDGER_STATE_DIR=str(tmp_path),
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "ERROR", "projector",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(90):  # a bound for the failure message, not a timing claim
            _, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 2, err.decode()[-2000:]
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert len(lines) == 1
    assert "agentledger topics ensure" in lines[0]
