"""Shared by the start-up failure tests: run `agentledger projector` on given endpoints."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path


async def projector_refusal(variables: dict[str, str], state_dir: Path) -> tuple[int | None, str]:
    """Exit code and stderr of `agentledger projector` run with only these ``AGENTLEDGER_*``
    variables (and ``state_dir``) of the environment, expected to refuse to start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(variables, AGENTLEDGER_STATE_DIR=str(state_dir))
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
    return proc.returncode, err.decode()


def nonblank_lines(err: str) -> list[str]:
    """The non-blank lines of a command's stderr."""
    return [line for line in err.splitlines() if line.strip()]
