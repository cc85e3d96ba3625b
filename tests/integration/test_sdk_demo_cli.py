"""``agentledger demo`` end to end as a user runs it: kill, flush, resume, verdict and exit code."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration


def demo_env(settings: CommonSettings, state_dir: Path) -> dict[str, str]:
    """The environment of a demo on the test's topics and keys (and nothing else AGENTLEDGER_)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(
        AGENTLEDGER_KAFKA_BOOTSTRAP=str(settings.kafka_bootstrap),
        AGENTLEDGER_REDIS_URL=str(settings.redis_url),
        AGENTLEDGER_TOPIC_PREFIX=settings.topic_prefix,
        AGENTLEDGER_KEY_PREFIX=settings.key_prefix,
        AGENTLEDGER_STATE_DIR=str(state_dir),
    )
    return env


async def demo_exit(settings: CommonSettings, state_dir: Path, *args: str) -> tuple[int, str]:
    """Run the demo without --flush; its exit code and stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", "demo", *args,
        env=demo_env(settings, state_dir), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await proc.communicate()
    return proc.returncode or 0, err.decode()


async def demo(
    settings: CommonSettings, state_dir: Path, *args: str, flush: str = "namespace"
) -> tuple[int, Any]:
    """Run the demo command on the test's topics and keys; return its exit code and JSON."""
    env = demo_env(settings, state_dir)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", "demo", "--json",
        *(["--flush", flush] if flush else []), *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert out.strip(), err.decode()[-3000:]
    return proc.returncode or 0, json.loads(out.decode().strip().splitlines()[-1])


async def test_demo_kill_before_checkpoint_resumes_and_reports_ok(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """Killed between acceptance and checkpoint: exit 0, no duplicate, no loss, same cost."""
    code, report = await demo(
        ledger_settings, tmp_path, "--runs", "3", "--kill-at", "before-checkpoint", "--seed", "9"
    )
    assert code == 0, report
    assert report["ok"] is True
    assert report["details"]["kill"]["killed"] is True
    assert report["duplicates"] == report["lost"] == 0
    assert report["effects_performed"] == report["effects_expected"] > 0
    assert report["tokens"] == report["expected_tokens"]
    assert report["finished"] == 3


async def test_demo_no_resume_leaves_the_runs_to_the_fleet(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """--no-resume stops after the kill: nothing verified, the run ids are listed."""
    code, report = await demo(
        ledger_settings, tmp_path, "--runs", "2", "--kill-at", "mid-activity", "--no-resume",
        "--run-prefix", "nr",
    )  # fmt: skip
    assert code == 0
    assert report["verified"] is False
    assert report["details"]["kill"]["killed"] is True
    assert report["details"]["left_for_fleet"] == ["nr-000", "nr-001"]


async def test_demo_never_wipes_a_redis_it_was_pointed_at_without_a_flag(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """With AGENTLEDGER_REDIS_URL set and no --flush, other keys survive; a kill needs the flag."""
    assert ledger_settings.redis_url is not None
    client = Redis.from_url(ledger_settings.redis_url)
    canary = f"{ledger_settings.key_prefix}-not-the-demos:canary"
    try:
        await client.set(canary, "keep me")
        code, report = await demo(ledger_settings, tmp_path, "--runs", "1", flush="")
        assert await client.get(canary) == b"keep me"
        assert code == 0, report
        assert report["details"]["flush"] == "none"
        refused = await demo_exit(ledger_settings, tmp_path, "--kill-at", "mid-activity")
        assert await client.get(canary) == b"keep me"
    finally:
        await client.delete(canary)
        await client.aclose()
    code, err = refused
    assert code == 2
    assert err.count("\n") == 1
    assert "--flush namespace" in err
