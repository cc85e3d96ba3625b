"""The projector (faust) and the reconciler as processes over the secured stack: SASL_SSL with
SCRAM and mTLS to Kafka, TLS with an ACL user to Redis."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from agentledger._core.ports import WorkerPorts
from agentledger.demo.agent import refund_agent, spec_for
from agentledger.projector.testing import ProjectorProcess, projector_settings, settings_env, until
from agentledger.providers.memory import MemoryProvider
from agentledger.settings import CommonSettings
from agentledger.stack.secure import SecureStack
from agentledger.views.model import RunView
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Ledger, WorkerSettings

from .conftest import isolated

pytestmark = pytest.mark.integration


async def one_run(common: CommonSettings, run_id: str) -> None:
    """The refund agent, run to success on ``common``'s endpoints."""
    settings = WorkerSettings(
        **common.model_dump(), transactional_id=f"p-{run_id}", resume_barrier_s=0.0
    )
    async with WorkerPorts(settings) as ports:
        ledger = Ledger.from_settings(
            settings,
            log=ports.log,
            leases=ports.leases,
            providers={"sandbox": MemoryProvider(name="sandbox")},
        )
        async with ledger.run(spec_for(run_id, 3)) as run:
            await refund_agent(run, 3)


@pytest.mark.parametrize("mode", ["SCRAM-SHA-512", "mTLS"])
async def test_the_projector_folds_runs_over_the_secured_stack(
    secure: SecureStack, mode: str
) -> None:
    """`agentledger projector` (faust) reads the run topics and writes the view into TLS Redis."""
    async for common in isolated(secure, mode):
        settings = projector_settings(common, projector_group=f"{common.key_prefix}-projector")
        async with ProjectorProcess(settings) as projector:
            await projector.wait_ready(timeout_s=120)
            await one_run(common, "sec-p")
            async with RedisViewStore.from_url(
                str(common.redis_url), key_prefix=common.key_prefix, settings=common
            ) as views:
                view = await until(
                    lambda: views.load("sec-p"),
                    lambda v: isinstance(v, RunView) and v.status == "succeeded",
                    timeout_s=90,
                )
        assert isinstance(view, RunView)
        assert view.status == "succeeded"


async def test_the_reconciler_passes_over_the_secured_stack(secure: SecureStack) -> None:
    """`agentledger reconciler --once` over SASL_SSL/SCRAM-SHA-256 scans the log and exits 0."""
    async for common in isolated(secure, "SCRAM-SHA-256"):
        await one_run(common, "sec-r")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
        env.update(settings_env(projector_settings(common)))
        env["AGENTLEDGER_RECONCILER_INTENT_GRACE_MS"] = "0"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING",
            "reconciler", "--once", "--json",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 180)
        assert proc.returncode == 0, err.decode()
        report = json.loads(out)
        assert (report["errors"], report["unknown"], report["intents"]) == (0, 0, 0)
        assert secure.password not in err.decode()
