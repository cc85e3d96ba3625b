"""Chaos: a worker SIGKILLed after the provider committed and a new process resuming its run
write one OpenTelemetry trace, found by the run id (spans exported by the OTEL_* settings)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentledger.demo.plan import kill_target, reference, run_ids
from agentledger.demo.runner import flush_redis, worker_command
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.telemetry.tracing import OUTCOME, RUN_ID, run_root
from agentledger.worker import WorkerSettings

pytestmark = pytest.mark.chaos
SEED = 3


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox(tmp_path: Path) -> AsyncIterator[SandboxProcess]:
    """A sandbox provider process of this test."""
    async with SandboxProcess(tmp_path / "sandbox.db") as process:
        yield process


async def traced(command: list[str], spans: Path, log: Path) -> int:
    """Run a demo worker with console span export to ``spans``; its exit code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTLEDGER_", "OTEL_"))}
    env |= {"OTEL_TRACES_EXPORTER": "console", "AGENTLEDGER_TRACES_FILE": str(spans)}
    with log.open("ab") as err:
        proc = await asyncio.create_subprocess_exec(
            *command, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        return await proc.wait()


def read_spans(path: Path) -> list[dict[str, Any]]:
    """Every exported span (one JSON object per line)."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def test_kill_and_resume_write_one_trace(
    ledger_settings: CommonSettings, sandbox: SandboxProcess, tmp_path: Path
) -> None:
    """The killed process's finished spans and the resuming process's spans share the trace id
    derived from the run id; the resume looks the effect up (landed) and replays nothing."""
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "state_dir": tmp_path})
    [run_id] = run_ids(f"trace-{uuid.uuid4().hex[:6]}", 1)
    ref = await reference([run_id], SEED)
    kill = kill_target("after-provider-commit", SEED, ref.hits)
    producer = f"trace-{uuid.uuid4().hex[:8]}"
    spans, log = tmp_path / "spans.jsonl", tmp_path / "workers.log"
    first = worker_command(
        settings, [(run_id, SEED)], url=sandbox.url, producer=producer, kill=kill, concurrency=1
    )
    assert await traced(first, spans, log) == -signal.SIGKILL
    await flush_redis(settings, "namespace")  # the dead worker's lease goes with its keys
    second = worker_command(
        settings, [(run_id, SEED)], url=sandbox.url, producer=producer, kill=None, concurrency=1
    )
    assert await traced(second, spans, log) == 0, log.read_text()[-2000:]

    mine = [s for s in read_spans(spans) if s["attributes"].get(RUN_ID) == run_id]
    assert {s["context"]["trace_id"] for s in mine} == {f"0x{run_root(run_id).trace_id:032x}"}
    by_pid: dict[int, list[dict[str, Any]]] = {}
    for s in mine:
        by_pid.setdefault(s["resource"]["attributes"]["process.pid"], []).append(s)
    assert len(by_pid) == 2
    killed, resumed = sorted(by_pid.values(), key=lambda group: group[0]["start_time"])
    assert "agentledger.step" in {s["name"] for s in killed}
    assert "agentledger.run.open" not in {s["name"] for s in killed}  # it never ended
    names = {(s["name"], s["attributes"].get(OUTCOME)) for s in resumed}
    assert ("agentledger.run.resume", "succeeded") in names
    assert ("agentledger.effect.lookup", "landed") in names
    assert ("agentledger.step", "replayed") in names
