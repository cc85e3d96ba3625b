"""Chaos: a resume whose RunResumed is only queued, SIGKILLed inside the window that opens.

A plain crash resume (running, same versions, no open intent) leaves RunResumed queued for the
run's first durable write (DESIGN.md §13). Real worker processes are SIGKILLed after a durable
checkpoint; Redis is flushed; ONE brand-new process resumes every run and is SIGKILLed at kill
point ``resume_pending`` (the resume is ready, nothing of it is in the log); Redis is flushed
again, so the last resumer's lease floor comes from the log alone, which never saw the killed
resumer's fence; one more brand-new process resumes every run to its end. The sandbox provider
must show every logical effect exactly once and every run must end with the outcome, step
results and cost of an uninterrupted run (the verification of test_kill_resume).
"""

from __future__ import annotations

import random
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from agentledger._core.writer import Checkpoints
from agentledger.demo.plan import Expected, Reference, reference, run_ids, verify
from agentledger.demo.runner import (
    flush_redis,
    performed_effects,
    read_views,
    spawn_forked,
    worker_command,
)
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.worker import WorkerSettings

pytestmark = pytest.mark.chaos

SEEDS = 4
RUNS_PER_SEED = 2
#: Where the first workers die: the run has a durable checkpoint and no open intent, so its
#: resume queues RunResumed (each_step: after_checkpoint is reached in that mode only).
FIRST_KILL = "after_checkpoint"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SandboxProcess]:
    """One sandbox provider process (its own SQLite file) for the whole module."""
    db = tmp_path_factory.mktemp("sandbox") / "effects.db"
    async with SandboxProcess(db) as process:
        yield process


async def kill_twice_then_resume(
    settings: WorkerSettings, sandbox: SandboxProcess, mode: Checkpoints, logs: Path
) -> tuple[Reference, list[int], int]:
    """Kill one worker per seed after a checkpoint, FLUSHALL, kill the resumer inside the
    window, FLUSHALL, resume everything in one process (the resumers run in ``mode``)."""
    producer = f"chaos-pending-{uuid.uuid4().hex[:8]}"
    runs: dict[str, Expected] = {}
    exits: list[int] = []
    targets: list[tuple[str, int]] = []
    for seed in range(SEEDS):
        ids = run_ids(f"pending-{uuid.uuid4().hex[:6]}-s{seed}", RUNS_PER_SEED)
        ref = await reference(ids, seed)
        hits = ref.hits.get(FIRST_KILL, 0)
        assert hits > 0, f"the reference never reaches {FIRST_KILL}"
        hit = 1 + random.Random(f"pending:{seed}").randrange(hits)
        mine = [(run_id, seed) for run_id in ids]
        command = worker_command(
            settings, mine, url=sandbox.url, producer=producer, kill=(FIRST_KILL, hit),
            concurrency=4,
        )  # fmt: skip
        code, _ = await spawn_forked(command, logs / f"seed-{seed}.log")
        exits.append(code)
        runs.update(ref.runs)
        targets += mine
    await flush_redis(settings, "all")
    # every seed left at least one run resumable with RunResumed queued: hit <= SEEDS is reached
    hit = 1 + random.Random(f"pending:{mode}").randrange(SEEDS)
    command = worker_command(
        settings, targets, url=sandbox.url, producer=producer, kill=("resume_pending", hit),
        concurrency=16, checkpoints=mode,
    )  # fmt: skip
    window, _ = await spawn_forked(command, logs / "resume-killed.log")
    await flush_redis(settings, "all")
    command = worker_command(
        settings, targets, url=sandbox.url, producer=producer, kill=None, concurrency=16,
        checkpoints=mode,
    )  # fmt: skip
    code, out = await spawn_forked(command, logs / "resume.log")
    assert code == 0, f"the resuming worker failed: {out[-2000:]}"
    return Reference(runs, {}), exits, window


@pytest.mark.parametrize("mode", ["each_step", "with_next_commit"])
async def test_a_resume_killed_before_its_first_write_loses_nothing_and_repeats_nothing(
    mode: Checkpoints,
    ledger_settings: CommonSettings,
    sandbox: SandboxProcess,
    tmp_path: Path,
) -> None:
    """Killed with only RunResumed queued, resumed cold after FLUSHALL: no duplicate, no loss,
    same outcome and cost as an uninterrupted run."""
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "state_dir": tmp_path})
    ref, exits, window = await kill_twice_then_resume(settings, sandbox, mode, tmp_path)
    assert exits == [-signal.SIGKILL] * SEEDS, "every first worker must die at its kill point"
    assert window == -signal.SIGKILL, "the resumer must die with RunResumed queued"
    views = await read_views(settings, list(ref.runs))
    report = verify(ref, views, await performed_effects(sandbox.url))
    assert report.mismatches == []
    assert (report.duplicates, report.lost, report.unexpected) == (0, 0, 0)
    assert report.effects_performed == report.effects_expected
    assert report.finished == len(ref.runs)
    assert (report.tokens, report.usd) == (report.expected_tokens, report.expected_usd)
