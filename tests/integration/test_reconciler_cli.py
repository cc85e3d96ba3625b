"""The on-call commands against the real stack: reconciler --once, alerts, effects."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import pytest

from agentledger.providers.faults import FaultRule
from tests.integration.test_reconciler import EFFECT, Env, env, module_settings

pytestmark = pytest.mark.integration
__all__ = ["env", "module_settings"]


def environment(e: Env) -> dict[str, str]:
    """The environment of a CLI call on the test's topics, keys and sandbox."""
    common = e.common
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")},
        "AGENTLEDGER_KAFKA_BOOTSTRAP": common.kafka_bootstrap or "",
        "AGENTLEDGER_REDIS_URL": common.redis_url or "",
        "AGENTLEDGER_TOPIC_PREFIX": common.topic_prefix,
        "AGENTLEDGER_KEY_PREFIX": common.key_prefix,
        "AGENTLEDGER_PROVIDER_URL": e.sandbox.url,
        "AGENTLEDGER_RECONCILER_ID": "rec-cli",
        "AGENTLEDGER_RECONCILER_INTENT_GRACE_MS": "0",
        "AGENTLEDGER_RECONCILER_DEFAULT_PROVIDER": '{"attempts": 1, "timeout_s": 3}',
    }


async def cli(e: Env, *args: str) -> Any:
    """Run ``agentledger ARGS`` on the test's topics and keys; its JSON output."""
    return json.loads(await run_cli(e, *args))


async def run_cli(e: Env, *args: str) -> str:
    """Run ``agentledger ARGS``; its standard output (the test fails on a non-zero exit)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", *args,
        env=environment(e), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_on_call_commands_show_and_ack_an_unknown_effect(env: Env) -> None:
    """--once finds the effect unknown; effects list shows it; alerts list/ack/tail follow it."""
    key = await env.dying_worker("run-cli", perform=True)
    await env.client.set_faults(FaultRule(mode="down"))
    report = await cli(env, "reconciler", "--once", "--json")
    assert report["unknown"] == 1
    assert report["pauses"] == 1
    assert report["alerts_opened"] == 1
    await env.view("run-cli")
    [row] = await cli(env, "effects", "list", "--run", "run-cli", "--json")
    assert {k: row[k] for k in ("run_id", "step", "effect", "state", "idempotency_key")} == {
        "run_id": "run-cli",
        "step": 0,
        "effect": EFFECT,
        "state": "unknown",
        "idempotency_key": key,
    }
    assert row["external_ref"] is None
    unknown = await cli(env, "effects", "list", "--state", "unknown", "--json")
    assert [r["idempotency_key"] for r in unknown] == [key]
    [alert] = await cli(env, "alerts", "list", "--json")
    assert (alert["code"], alert["state"], alert["count"]) == ("effect.unknown", "open", 1)
    assert alert["idempotency_key"] == key
    acked = await cli(env, "alerts", "ack", alert["alert_id"], "--by", "oncall", "--json")
    assert acked["state"] == "closed"
    tail = await cli_lines(env, "alerts", "tail", "--json")
    assert [(a["alert_id"], a["state"]) for a in tail] == [
        (alert["alert_id"], "open"),
        (alert["alert_id"], "closed"),
    ]


async def cli_lines(e: Env, *args: str) -> list[Any]:
    """Like :func:`cli` for commands printing one JSON object per line."""
    out = await run_cli(e, *args)
    return [json.loads(line) for line in out.splitlines() if line.strip()]
