"""A forked worker that never exits is killed after its timeout and reported, not waited on."""

from __future__ import annotations

import sys
from pathlib import Path

from agentledger.demo.runner import TIMED_OUT, spawn_forked


async def test_a_worker_still_running_after_its_timeout_is_killed(tmp_path: Path) -> None:
    """A child serving forever (the sandbox) comes back as TIMED_OUT once its time is up."""
    command = [
        sys.executable, "-m", "agentledger.cli", "--log-level", "ERROR", "sandbox", "serve",
        "--port", "0", "--db", str(tmp_path / "effects.db"),
    ]  # fmt: skip
    code, _ = await spawn_forked(command, tmp_path / "serve.log", timeout_s=3)
    assert code == TIMED_OUT
