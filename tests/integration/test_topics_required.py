"""Missing topics fail fast, in one line saying `agentledger topics ensure` (SDK, projector)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import ConfigurationError
from agentledger.settings import CommonSettings
from tests.cli_support import nonblank_lines, projector_refusal

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


async def test_the_projector_without_topics_exits_2_in_nonblank_lines(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """`agentledger projector` on a prefix with no topics refuses to start (not ready, 0 parts)."""
    settings = without_topics(ledger_settings)
    code, err = await projector_refusal(
        {
            "AGENTLEDGER_KAFKA_BOOTSTRAP": str(settings.kafka_bootstrap),
            "AGENTLEDGER_REDIS_URL": str(settings.redis_url),
            "AGENTLEDGER_TOPIC_PREFIX": settings.topic_prefix,
        },
        tmp_path,
    )
    assert code == 2, err[-2000:]
    lines = nonblank_lines(err)
    assert len(lines) == 1
    assert "agentledger topics ensure" in lines[0]
