"""`runs list` without a projector says no projector indexed the prefix, not "no runs"."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration


async def test_runs_list_on_a_prefix_no_projector_indexed(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """With no views ever written under the key prefix, the answer names the missing projector."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(
        AGENTLEDGER_KAFKA_BOOTSTRAP=str(ledger_settings.kafka_bootstrap),
        AGENTLEDGER_REDIS_URL=str(ledger_settings.redis_url),
        AGENTLEDGER_TOPIC_PREFIX=ledger_settings.topic_prefix,
        AGENTLEDGER_KEY_PREFIX=ledger_settings.key_prefix,
        AGENTLEDGER_STATE_DIR=str(tmp_path),
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "ERROR", "runs", "list",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "no projector has indexed key prefix" in out.decode()
    assert out.decode().strip() != "no runs"
