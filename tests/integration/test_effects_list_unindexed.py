"""Issue 17 finding 5: `effects list` without a projector says no projector indexed the prefix
instead of an empty table, and `--run RUN` reads the run's effects from the log."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from agentledger._core.ports import WorkerPorts
from agentledger.demo.agent import refund_agent, spec_for
from agentledger.providers.memory import MemoryProvider
from agentledger.settings import CommonSettings
from agentledger.worker import Ledger, WorkerSettings

pytestmark = pytest.mark.integration


async def effects_list(settings: CommonSettings, tmp_path: Path, *args: str) -> tuple[str, str]:
    """``agentledger effects list ARGS`` on the test's topics and keys: stdout and stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(
        AGENTLEDGER_KAFKA_BOOTSTRAP=str(settings.kafka_bootstrap),
        AGENTLEDGER_REDIS_URL=str(settings.redis_url),
        AGENTLEDGER_TOPIC_PREFIX=settings.topic_prefix,
        AGENTLEDGER_KEY_PREFIX=settings.key_prefix,
        AGENTLEDGER_STATE_DIR=str(tmp_path),
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "ERROR", "effects", "list", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-2000:]
    return out.decode(), err.decode()


async def test_effects_list_with_runs_in_kafka_and_no_projector(
    ledger_settings: CommonSettings, tmp_path: Path
) -> None:
    """Two runs with effects are in Kafka, no projector ran: the table names the missing
    projector (JSON stays a list, the note goes to stderr), and --run folds the log."""
    worker = WorkerSettings(
        **ledger_settings.model_dump(), transactional_id="effects-list-w", resume_barrier_s=0.0
    )
    async with WorkerPorts(worker) as ports:
        ledger = Ledger.from_settings(
            worker,
            log=ports.log,
            leases=ports.leases,
            providers={"sandbox": MemoryProvider(name="sandbox")},
        )
        for run_id in ("el-1", "el-2"):
            async with ledger.run(spec_for(run_id, 7)) as run:
                await refund_agent(run, 7)
    out, _ = await effects_list(ledger_settings, tmp_path)
    assert "no projector has indexed key prefix" in out
    out, err = await effects_list(ledger_settings, tmp_path, "--json")
    assert json.loads(out) == []
    assert "no projector has indexed key prefix" in err
    out, _ = await effects_list(ledger_settings, tmp_path, "--run", "el-1", "--json")
    rows = json.loads(out)
    assert rows
    assert {r["run_id"] for r in rows} == {"el-1"}
    assert all(r["state"] == "succeeded" for r in rows)
