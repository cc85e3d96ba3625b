"""A worker run over every secured client configuration: SASL_SSL (SCRAM-SHA-256/512, PLAIN)
and mTLS to Kafka, TLS with an ACL user to Redis."""

from __future__ import annotations

import io

import pytest
from pydantic import SecretStr

from agentledger._core.loader import fold_log
from agentledger._core.ports import WorkerPorts
from agentledger.bus.publisher import KafkaPublisher
from agentledger.demo.agent import PLAN, refund_agent, spec_for
from agentledger.errors import ConfigurationError
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


async def test_secrets_are_never_logged(secure: SecureStack, all_logs: io.StringIO) -> None:
    """A run over SCRAM and TLS Redis, then a start with a wrong password: with every logger at
    DEBUG, neither password appears in the log nor in the error."""
    wrong = "Wr0ng-" + secure.password[::-1]
    async for common in isolated(secure, "SCRAM-SHA-512"):
        settings = WorkerSettings(
            **common.model_dump(), transactional_id="sec-log", resume_barrier_s=0.0
        )
        async with WorkerPorts(settings) as ports:
            ledger = Ledger.from_settings(
                settings,
                log=ports.log,
                leases=ports.leases,
                providers={"sandbox": MemoryProvider(name="sandbox")},
            )
            async with ledger.run(spec_for("sec-log", 5)) as run:
                await refund_agent(run, 5)
        bad = settings.model_copy(update={"kafka_sasl_password": SecretStr(wrong)})
        with pytest.raises(ConfigurationError) as refused:
            async with KafkaPublisher(bad):
                pass
    text = all_logs.getvalue()
    assert "sasl" in text.lower() or "kafka" in text.lower()  # the libraries did log
    for secret in (secure.password, wrong):
        assert secret not in text
        assert secret not in str(refused.value)
    assert "AGENTLEDGER_KAFKA_SASL_PASSWORD" in str(refused.value)
