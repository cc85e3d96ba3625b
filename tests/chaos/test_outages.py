"""Chaos: the broker or Redis goes away while runs are in flight; runs wait, then finish.

A demo worker process (a brand-new interpreter) walks refund runs against the sandbox provider,
whose performs are slowed down so that runs are in flight when, after the first effect, the
broker is restarted, SIGKILLed then started, or Redis is SIGKILLed then started. Within the
outage budget the worker waits and every run finishes in that same process; past the budget
(a small one) the worker exits 2 with one line naming the dependency and the wait, and a new
worker resumes every run. The sandbox provider's own effect list is the judge: every logical
effect exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from agentledger.demo.plan import Reference, reference, run_ids, verify
from agentledger.demo.runner import performed_effects, read_views, worker_command
from agentledger.providers.faults import FaultRule
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.worker import WorkerSettings
from tests.conftest import StackUnderTest

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

RUNS = 6
PERFORM_LATENCY_MS = 150
Chaos = Callable[[StackUnderTest], Awaitable[None]]


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox(tmp_path: Path) -> AsyncIterator[SandboxProcess]:
    """A sandbox provider whose performs each take a while, so runs are in flight for long."""
    async with SandboxProcess(tmp_path / "effects.db") as process:
        async with SandboxClient(process.url) as client:
            await client.set_faults(FaultRule(latency_ms=PERFORM_LATENCY_MS, ops={"perform"}))
        yield process


async def start_worker(
    settings: WorkerSettings,
    ids: list[str],
    sandbox: SandboxProcess,
    log: Path,
    env: dict[str, str] | None = None,
) -> asyncio.subprocess.Process:
    """A demo worker process walking ``ids`` (seed 1), with ``env`` added to its environment."""
    command = worker_command(
        settings,
        [(run_id, 1) for run_id in ids],
        url=sandbox.url,
        producer=f"outage-{uuid.uuid4().hex[:8]}",
        kill=None,
        concurrency=len(ids),
    )
    with log.open("ab") as err:
        return await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env={**os.environ, **(env or {})},
        )


async def first_effect(sandbox: SandboxProcess, worker: asyncio.subprocess.Process) -> int:
    """Wait until the provider performed an effect (runs are in flight); how many it had."""
    while worker.returncode is None:
        performed = await performed_effects(sandbox.url)
        if performed:
            return len(performed)
        await asyncio.sleep(0.05)
    pytest.fail(f"the worker exited ({worker.returncode}) before performing any effect")


async def judge(settings: WorkerSettings, ref: Reference, sandbox: SandboxProcess) -> None:
    """Every run finished as uninterrupted, every logical effect performed exactly once."""
    views = await read_views(settings, list(ref.runs))
    report = verify(ref, views, await performed_effects(sandbox.url))
    assert (report.duplicates, report.lost, report.unexpected) == (0, 0, 0)
    assert report.mismatches == []
    assert report.finished == len(ref.runs)
    assert report.effects_performed == report.effects_expected


async def restart_broker(stack: StackUnderTest) -> None:
    """Stop the broker gracefully and start it on the same port and data."""
    await stack.restart_kafka()


async def kill_then_start_broker(stack: StackUnderTest) -> None:
    """SIGKILL the broker, then start it on the same port and data."""
    local = stack.require_local()
    assert await local.kill_kafka()
    await local.start_kafka()


async def kill_then_start_redis(stack: StackUnderTest) -> None:
    """SIGKILL Redis, then start it on the same port and data (its AOF)."""
    local = stack.require_local_redis()
    assert await local.kill_redis()
    await asyncio.sleep(1.0)  # down for a while, not just a reconnect
    await local.up(["redis"])


@pytest.mark.parametrize(
    "chaos",
    [restart_broker, kill_then_start_broker, kill_then_start_redis],
    ids=["broker-restart", "broker-sigkill", "redis-sigkill"],
)
async def test_runs_in_flight_ride_out_the_outage(
    chaos: Chaos,
    stack: StackUnderTest,
    ledger_settings: CommonSettings,
    sandbox: SandboxProcess,
    tmp_path: Path,
) -> None:
    """Within the budget, runs in flight wait for the dependency and all finish in the same
    worker process, with no effect performed twice or lost."""
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "state_dir": tmp_path})
    ids = run_ids(f"ride-{uuid.uuid4().hex[:6]}", RUNS)
    ref = await reference(ids, 1)
    worker = await start_worker(settings, ids, sandbox, tmp_path / "worker.log")
    await first_effect(sandbox, worker)
    await chaos(stack)
    out, _ = await worker.communicate()
    log = (tmp_path / "worker.log").read_text(errors="replace")
    assert worker.returncode == 0, log[-3000:]
    outcome = json.loads(out.decode().strip().splitlines()[-1])
    assert sorted(outcome) == sorted(ids)
    assert all(status.startswith("succeeded") for status in outcome.values()), outcome
    await judge(settings, ref, sandbox)
    # the wait said so: one line when it began, one when the dependency was back
    dependency = "Redis" if chaos is kill_then_start_redis else "Kafka"
    waits = [line for line in log.splitlines() if "dependency_unreachable_waiting" in line]
    backs = [line for line in log.splitlines() if "dependency_back" in line]
    assert any(dependency in line for line in waits), log[-3000:]
    assert len(waits) == len(backs), log[-3000:]


async def test_outage_past_the_budget_is_one_line_and_runs_resume(
    stack: StackUnderTest,
    ledger_settings: CommonSettings,
    sandbox: SandboxProcess,
    tmp_path: Path,
) -> None:
    """A broker gone (SIGKILLed) longer than the budget stops the worker with exit 2 and one
    line naming Kafka and the wait; once the broker is back a new worker finishes every run
    exactly once."""
    local = stack.require_local()
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "state_dir": tmp_path})
    ids = run_ids(f"past-{uuid.uuid4().hex[:6]}", RUNS)
    ref = await reference(ids, 1)
    small = {
        "AGENTLEDGER_OUTAGE_BUDGET_S": "2",
        "AGENTLEDGER_KAFKA_PUBLISH_TIMEOUT_MS": "3000",
        "AGENTLEDGER_KAFKA_CONNECT_TIMEOUT_MS": "2000",
    }
    worker = await start_worker(settings, ids, sandbox, tmp_path / "first.log", small)
    await first_effect(sandbox, worker)
    try:
        assert await local.kill_kafka()
        await worker.communicate()
    finally:
        await local.start_kafka()
    lines = (tmp_path / "first.log").read_text(errors="replace").strip().splitlines()
    assert worker.returncode == 2, "\n".join(lines[-30:])
    assert lines[-1].startswith("agentledger: error: Kafka at "), lines[-1]
    assert "unreachable: gave up after waiting" in lines[-1]
    assert "AGENTLEDGER_OUTAGE_BUDGET_S=2" in lines[-1]
    resumed = await start_worker(settings, ids, sandbox, tmp_path / "resume.log")
    out, _ = await resumed.communicate()
    log = (tmp_path / "resume.log").read_text(errors="replace")
    assert resumed.returncode == 0, log[-3000:]
    outcome = json.loads(out.decode().strip().splitlines()[-1])
    assert all(status.startswith("succeeded") for status in outcome.values()), outcome
    await judge(settings, ref, sandbox)


async def test_redis_restarting_empty_is_a_wipe_and_runs_resume(
    stack: StackUnderTest,
    ledger_settings: CommonSettings,
    sandbox: SandboxProcess,
    tmp_path: Path,
) -> None:
    """Redis SIGKILLed and started without its data loses the leases: runs in flight stop on a
    stale fence (none goes on unfenced), and a new worker resumes every one from the log's fence
    floor, each logical effect performed exactly once."""
    local = stack.require_local_redis()
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "state_dir": tmp_path})
    ids = run_ids(f"empty-{uuid.uuid4().hex[:6]}", RUNS)
    ref = await reference(ids, 1)
    worker = await start_worker(settings, ids, sandbox, tmp_path / "first.log")
    await first_effect(sandbox, worker)
    assert await local.kill_redis()
    for item in local.paths.redis_data.iterdir():
        if item.is_dir():
            shutil.rmtree(item)
        else:
            item.unlink()
    await local.up(["redis"])
    out, _ = await worker.communicate()
    first = json.loads(out.decode().strip().splitlines()[-1]) if out.strip() else {}
    stopped = [r for r, status in first.items() if not status.startswith("succeeded")]
    assert all("fence" in first[r] or "lease" in first[r] for r in stopped), first
    resumed = await start_worker(settings, ids, sandbox, tmp_path / "resume.log")
    out, _ = await resumed.communicate()
    log = (tmp_path / "resume.log").read_text(errors="replace")
    assert resumed.returncode == 0, log[-3000:]
    outcome = json.loads(out.decode().strip().splitlines()[-1])
    assert all(status.startswith("succeeded") for status in outcome.values()), outcome
    await judge(settings, ref, sandbox)
