"""Plain helpers of the fleet integration tests: run predicates, the sandbox's counts, the CLI."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from collections.abc import Callable

from agentledger.fleet import FleetSettings
from agentledger.fleet.testing import settings_env
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.views import RunView


def finished(ids: list[str]) -> Callable[[dict[str, RunView]], bool]:
    """A predicate: every run of ``ids`` has finished."""

    def check(views: dict[str, RunView]) -> bool:
        return all(r in views and views[r].status not in {"running", "paused"} for r in ids)

    return check


async def performed(sandbox: SandboxProcess) -> Counter[str]:
    """How many times the sandbox performed each idempotency key."""
    async with SandboxClient(sandbox.url) as client:
        return Counter(e.idempotency_key for e in await client.effects())


async def cli(settings: FleetSettings, *args: str) -> str:
    """``agentledger <args>`` in a child process configured only by ``settings``; its stdout.

    The child sees this process's environment minus every AGENTLEDGER_* variable, plus
    ``settings`` as those variables; a non-zero exit fails the test with its stderr.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(settings_env(settings))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    return out.decode()
