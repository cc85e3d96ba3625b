"""The example LangGraph refund agent, SIGKILLed right after the sandbox committed its refund,
resumed in a new process on a wiped Redis: the refund happened exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from agentledger.providers.sandbox import SandboxClient, SandboxProcess
from agentledger.settings import CommonSettings

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_refund.py"
PROCESS_TIMEOUT_S = 180


def example_env(settings: CommonSettings, provider_url: str, **extra: str) -> dict[str, str]:
    """The child's environment: this test's topics, keys and sandbox; short leases."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    assert settings.kafka_bootstrap is not None
    assert settings.redis_url is not None
    env.update(
        AGENTLEDGER_KAFKA_BOOTSTRAP=settings.kafka_bootstrap,
        AGENTLEDGER_REDIS_URL=settings.redis_url,
        AGENTLEDGER_TOPIC_PREFIX=settings.topic_prefix,
        AGENTLEDGER_KEY_PREFIX=settings.key_prefix,
        AGENTLEDGER_PROVIDER_URL=provider_url,
        AGENTLEDGER_LEASE_TTL_MS="3000",
        AGENTLEDGER_RESUME_BARRIER_S="0",
        AGENTLEDGER_KAFKA_TRANSACTION_TIMEOUT_MS="5000",
        AGENTLEDGER_LOG_LEVEL="WARNING",
        **extra,
    )
    return env


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


async def wipe_redis(settings: CommonSettings) -> None:
    """FLUSHALL, scoped to this test's keys: views and leases are gone (a cold machine)."""
    assert settings.redis_url is not None
    client = Redis.from_url(settings.redis_url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{settings.key_prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


async def test_refund_killed_after_provider_commit_is_performed_once_after_resume(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """SIGKILL right after the provider committed the refund, Redis wiped, graph resumed in a
    new process: the sandbox performed the refund once (found by lookup) and the email once."""
    thread = f"chaos-{uuid.uuid4().hex[:8]}"
    async with (
        SandboxProcess(tmp_path / "sandbox.db") as sandbox,
        SandboxClient(sandbox.url) as client,
    ):
        env = example_env(ledger_settings, sandbox.url)
        code, started, err = await run_example(
            env, "start", "--thread", thread, "--order", "ord-9", "--amount", "1500"
        )
        assert code == 0, err
        assert started is not None
        assert started["next"] == ["approval"]
        assert await client.effects() == []

        killer = example_env(
            ledger_settings, sandbox.url, AGENTLEDGER_KILL_POINT="after_provider_commit"
        )
        code, _, err = await run_example(killer, "approve", "--thread", thread)
        assert code == -signal.SIGKILL, err
        refunds = await client.effects("refunds")
        assert len(refunds) == 1  # the provider committed; the outcome was never recorded
        assert await client.effects("emails") == []

        await wipe_redis(ledger_settings)
        code, finished, err = await run_example(env, "approve", "--thread", thread)
        assert code == 0, err
        effects = await client.effects()
        lookups = await client.lookups()

    assert finished is not None
    assert finished["next"] == []
    tools = {m["name"]: json.loads(m["content"]) for m in finished["messages"] if m["name"]}
    assert tools["refund"] == {"ref": refunds[0].id, "replayed": True}
    assert tools["email_customer"]["replayed"] is False
    performed = Counter((e.kind, e.idempotency_key) for e in effects)
    assert sorted(kind for kind, _ in performed) == ["emails", "refunds"]
    assert set(performed.values()) == {1}
    assert lookups.get(refunds[0].idempotency_key) == 1  # reconciled by lookup, not re-sent
