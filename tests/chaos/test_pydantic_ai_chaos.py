"""The example Pydantic AI support agent, SIGKILLed right after the sandbox committed its refund,
resumed in a new process on a wiped Redis: the refund happened once and no recorded model
request was sent again."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentledger.providers.sandbox import SandboxClient, SandboxProcess
from agentledger.settings import CommonSettings
from tests.chaos.test_langgraph_chaos import PROCESS_TIMEOUT_S, example_env, wipe_redis

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pydantic_ai_refund.py"


async def run_example(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any] | None, str]:
    """Run the example in its own process: (exit code, its JSON answer if any, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), PROCESS_TIMEOUT_S)
    assert proc.returncode is not None
    answer = json.loads(out) if proc.returncode == 0 else None
    return proc.returncode, answer, err.decode(errors="replace")


async def test_refund_killed_after_provider_commit_is_performed_once_after_resume(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """Paused for approval, approved, SIGKILLed right after the sandbox committed the refund,
    Redis wiped, resumed in a new process: the refund was looked up (not sent again), the email
    sent once, and the resumed process sent only the model requests that were never recorded."""
    run_id = f"chaos-pai-{uuid.uuid4().hex[:8]}"
    order = ["--run", run_id, "--order", "ord-9", "--amount", "1500"]
    async with (
        SandboxProcess(tmp_path / "sandbox.db") as sandbox,
        SandboxClient(sandbox.url) as client,
    ):
        env = example_env(ledger_settings, sandbox.url)
        code, started, err = await run_example(env, "start", *order)
        assert code == 0, err
        assert started is not None
        assert started["status"] == "paused"
        assert started["waiting_for"] == "approval"
        assert started["model_requests"] == [1]  # asked for the refund, then the run paused
        assert await client.effects() == []

        killer = example_env(
            ledger_settings, sandbox.url, AGENTLEDGER_KILL_POINT="after_provider_commit"
        )
        code, _, err = await run_example(killer, "approve", *order)
        assert code == -signal.SIGKILL, err
        refunds = await client.effects("refunds")
        assert len(refunds) == 1  # the provider committed; the outcome was never recorded
        assert await client.effects("emails") == []

        await wipe_redis(ledger_settings)
        code, finished, err = await run_example(env, "resume", *order)
        assert code == 0, err
        effects = await client.effects()
        lookups = await client.lookups()

    assert finished is not None
    assert finished["status"] == "succeeded"
    assert finished["output"] == "Order ord-9 refunded and the customer told."
    # Request 1 (refund) came from the record; only the two after the refund were sent.
    assert finished["model_requests"] == [3, 5]
    assert finished["sent"] == 2
    performed = Counter((e.kind, e.idempotency_key) for e in effects)
    assert sorted(kind for kind, _ in performed) == ["emails", "refunds"]
    assert set(performed.values()) == {1}
    assert lookups.get(refunds[0].idempotency_key) == 1  # reconciled by lookup, not re-sent
