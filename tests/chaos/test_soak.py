"""Chaos: a bounded `agentledger soak` (one trial per kill point) and a soak that must fail."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path

import pytest

from agentledger.demo.soak import SOAK_POINTS, render_soak
from agentledger.demo.soak_runner import SoakOptions, run_soak
from agentledger.providers.http import HttpProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.worker import WorkerSettings

pytestmark = pytest.mark.chaos


async def test_a_bounded_soak_over_every_kill_point_passes(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """One trial per kill point: each worker dies there, every effect lands once, same cost."""
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "state_dir": tmp_path})
    report = await run_soak(settings, SoakOptions(trials=len(SOAK_POINTS), seed=11, batch=5))
    assert report.ok, render_soak(report)
    assert {p: t.trials for p, t in report.by_point().items()} == dict.fromkeys(SOAK_POINTS, 1)
    assert all(o.killed for o in report.outcomes)
    assert report.total().duplicates == report.total().lost == 0
    assert not any((tmp_path / "soak").rglob("*.log"))  # nothing kept when nothing failed


async def test_a_soak_whose_provider_shows_an_extra_effect_exits_1_and_keeps_logs(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """A ticket the runs did not ask for, in the provider's own list, fails the soak (exit 1)."""
    prefix = f"soak-bad-{uuid.uuid4().hex[:6]}"
    async with SandboxProcess(tmp_path / "effects.db") as sandbox:
        async with HttpProvider(sandbox.url, name="sandbox") as provider:
            rogue = EffectRequest(
                kind="tickets",
                identity={"order_id": f"ord-{prefix}-t00000-0", "queue": "refunds"},
                free_text={"summary": "opened by someone else"},
            )
            await provider.perform(rogue, f"rogue-{prefix}")
        env = {
            **os.environ,
            "AGENTLEDGER_KAFKA_BOOTSTRAP": str(ledger_settings.kafka_bootstrap),
            "AGENTLEDGER_REDIS_URL": str(ledger_settings.redis_url),
            "AGENTLEDGER_STATE_DIR": str(tmp_path),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", "soak",
            "--trials", "1", "--kill-at", "after-checkpoint", "--runs-per-trial", "1",
            "--provider-url", sandbox.url, "--run-prefix", prefix, "--json",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await proc.communicate()
    assert proc.returncode == 1, err.decode()[-2000:]
    report = json.loads(out)
    assert report["ok"] is False
    [failure] = report["failures"]
    assert (failure["duplicates"], failure["unexpected"], failure["lost"]) == (1, 1, 0)
    assert b"1/1 trials, 1 failed" in err
    assert (tmp_path / "soak" / prefix / "trial-00000.kill.log").exists()
