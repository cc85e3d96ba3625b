"""A worker run over every secured client configuration: SASL_SSL (SCRAM-SHA-256/512, PLAIN)
and mTLS to Kafka, TLS with an ACL user to Redis."""

from __future__ import annotations

import pytest

from agentledger._core.loader import fold_log
from agentledger._core.ports import WorkerPorts
from agentledger.demo.agent import PLAN, refund_agent, spec_for
from agentledger.providers.memory import MemoryProvider
from agentledger.stack.secure import SecureStack
from agentledger.worker import Ledger, WorkerSettings

from .conftest import MODES, isolated

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mode", MODES)
async def test_a_worker_run_over_the_secured_stack(secure: SecureStack, mode: str) -> None:
    """The refund agent runs to success with its events in Kafka and its lease in TLS Redis."""
    async for common in isolated(secure, mode):
        settings = WorkerSettings(
            **common.model_dump(), transactional_id=f"sec-{mode}", resume_barrier_s=0.0
        )
        provider = MemoryProvider(name="sandbox")
        async with WorkerPorts(settings) as ports:
            ledger = Ledger.from_settings(
                settings, log=ports.log, leases=ports.leases, providers={"sandbox": provider}
            )
            async with ledger.run(spec_for("sec-1", 7)) as run:
                await refund_agent(run, 7)
            view = await fold_log(ports.log, "sec-1")
        assert view.status == "succeeded"
        assert view.cursor == len(PLAN)
        assert len(provider.effects) == len(view.effects)
