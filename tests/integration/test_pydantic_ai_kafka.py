"""Pydantic AI on the real stack (Kafka, Redis, the sandbox process): a retried tool call gets
its recorded effect instead of a second one."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.models.function import FunctionModel

from agentledger._core.ports import WorkerPorts
from agentledger.integrations.pydantic_ai import AgentLedgerDurability, perform_effect, run_agent
from agentledger.providers import HttpProvider
from agentledger.providers.sandbox import SandboxClient, SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.worker import Ledger, WorkerSettings
from tests.unit.test_pydantic_ai import Script, refund_request

pytestmark = pytest.mark.integration


async def test_model_retry_after_the_refund_does_not_refund_again(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """A refund tool that raises ModelRetry after the sandbox refunded: the model calls it
    again, the call gets the recorded refund, and the sandbox holds one refund, asked once."""
    settings = WorkerSettings(**ledger_settings.model_dump(), lease_ttl_ms=5_000)
    script = Script()
    replayed: list[bool] = []
    agent: Agent[None, str] = Agent(
        FunctionModel(script, model_name="scripted"),
        name="support",
        capabilities=[AgentLedgerDurability()],
    )

    @agent.tool(retries=2)
    async def refund(ctx: RunContext[None], order_id: str, amount_cents: int) -> dict[str, Any]:
        """Refund an order; the first time, ask the model to confirm after refunding."""
        done = await perform_effect("refund", refund_request(order_id, amount_cents))
        replayed.append(done.replayed)
        if ctx.retry == 0:
            raise ModelRetry("confirm the amount")
        return {"ref": done.external_ref}

    async with (
        SandboxProcess(tmp_path / "sandbox.db") as sandbox,
        SandboxClient(sandbox.url) as client,
        HttpProvider(sandbox.url, name="sandbox") as provider,
        WorkerPorts(settings) as ports,
    ):
        ledger = Ledger.from_settings(
            settings, log=ports.log, leases=ports.leases, providers={"sandbox": provider}
        )
        run_id = f"pai-retry-{uuid.uuid4().hex[:8]}"
        done = await run_agent(agent, "refund ord-7", ledger=ledger, run_id=run_id)
        refunds = await client.effects("refunds")

    assert done.status == "succeeded"
    assert replayed == [False, True]
    assert len(refunds) == 1
    assert done.output == f"refunded: {{'ref': '{refunds[0].id}'}}"
