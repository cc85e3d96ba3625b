"""Chaos: Redis goes away under a running reconciler for longer than the outage budget.

The reconciler service (``agentledger reconciler``, a child process) retries its passes while
the outage lasts less than the budget, counted from the first failure, then exits 2 with one
line naming Redis and the wait. Nothing it had to do is lost: once Redis is back, the next
reconciler resolves the intent a dead worker left open, and the run resumes with its effect
performed exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
from pathlib import Path

import aiohttp
import pytest

from agentledger.projector.testing import free_port
from agentledger.views.redis_store import RedisViewStore
from tests.conftest import StackUnderTest
from tests.integration.test_reconciler import Env, env, module_settings
from tests.integration.test_reconciler_cli import cli, environment

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]
__all__ = ["env", "module_settings"]

BUDGET_S = 2


def tail(log: Path) -> str:
    """The end of a child's log (for a failure message)."""
    return log.read_text(errors="replace")[-3000:]


async def until_serving(proc: asyncio.subprocess.Process, port: int, log: Path) -> None:
    """Until the reconciler's /metrics page answers (its first pass ran); fail if it exits."""
    deadline = asyncio.get_running_loop().time() + 60
    while asyncio.get_running_loop().time() < deadline:
        if proc.returncode is not None:
            pytest.fail(f"the reconciler exited {proc.returncode}: {tail(log)}")
        with contextlib.suppress(aiohttp.ClientError, OSError):
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://127.0.0.1:{port}/metrics") as response,
            ):
                if response.status == 200:
                    return
        await asyncio.sleep(0.2)
    pytest.fail(f"the reconciler did not serve /metrics: {tail(log)}")


async def test_redis_gone_past_the_budget_stops_the_reconciler_in_one_line(
    env: Env, stack: StackUnderTest, tmp_path: Path
) -> None:
    """Redis SIGKILLed for longer than the budget makes ``agentledger reconciler`` exit 2 with
    one line naming Redis and the wait (no traceback); after Redis is back the next reconciler
    lands the intent a dead worker left open, and the resumed run does not perform it again."""
    local = stack.require_local_redis()
    key = await env.dying_worker("run-outage", perform=True)
    port = free_port()
    log = tmp_path / "reconciler.log"
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentledger.cli", "reconciler",
            env={
                **environment(env),
                "AGENTLEDGER_OUTAGE_BUDGET_S": str(BUDGET_S),
                # the intent is left to the reconciler that runs after the outage
                "AGENTLEDGER_RECONCILER_INTENT_GRACE_MS": "3600000",
                "AGENTLEDGER_RECONCILER_POLL_INTERVAL_S": "0.2",
                "AGENTLEDGER_RECONCILER_METRICS_PORT": str(port),
            },
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )  # fmt: skip
    try:
        await until_serving(proc, port, log)
        try:
            assert await local.kill_redis()
            code = await asyncio.wait_for(proc.wait(), 120)
        finally:
            await local.up(["redis"])
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    text = log.read_text(errors="replace")
    lines = text.strip().splitlines()
    assert code == 2, "\n".join(lines[-30:])
    assert "Traceback" not in text, text[-3000:]
    assert lines[-1].startswith("agentledger: error: Redis at "), lines[-1]
    assert "is unreachable: gave up after waiting" in lines[-1], lines[-1]
    assert f"(AGENTLEDGER_OUTAGE_BUDGET_S={BUDGET_S})" in lines[-1], lines[-1]
    [performed] = await env.effects(key)
    report = await cli(env, "reconciler", "--once", "--json")
    assert report["landed"] == 1
    assert env.common.redis_url is not None
    async with RedisViewStore.from_url(  # the fixture's store does not ride out the restart
        env.common.redis_url, key_prefix=env.common.key_prefix, outage_budget_s=30
    ) as views:
        after = dataclasses.replace(env, views=views)
        view = await after.view("run-outage")
        assert view.effects[key].state == "landed"
        assert view.effects[key].external_ref == performed.id
        result = await after.resume("run-outage")
    assert result == {"external_ref": performed.id, "replayed": True}
    assert len(await env.effects(key)) == 1
