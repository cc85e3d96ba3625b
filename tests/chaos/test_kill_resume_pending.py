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
from pathlib import Path

import pytest

from agentledger._core.writer import Checkpoints
from agentledger.demo.plan import Reference
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.worker import WorkerSettings
from tests.chaos.kill_resume_support import (
    assert_as_uninterrupted,
    kill_one_worker_per_seed,
    resume_after_flushall,
    sandbox,
)

pytestmark = pytest.mark.chaos
__all__ = ["sandbox"]  # the module-scoped sandbox fixture, shared

SEEDS = 4
#: Where the first workers die: the run has a durable checkpoint and no open intent, so its
#: resume queues RunResumed (each_step: after_checkpoint is reached in that mode only).
FIRST_KILL = "after_checkpoint"


async def kill_twice_then_resume(
    settings: WorkerSettings, sandbox: SandboxProcess, mode: Checkpoints, logs: Path
) -> tuple[Reference, list[int], int]:
    """Kill one worker per seed after a checkpoint, FLUSHALL, kill the resumer inside the
    window, FLUSHALL, resume everything in one process (the resumers run in ``mode``)."""
    producer = f"chaos-pending-{uuid.uuid4().hex[:8]}"
    killed = await kill_one_worker_per_seed(
        settings, sandbox, seeds=SEEDS, point=FIRST_KILL, label="pending", hit_key="pending",
        producer=producer, logs=logs,
    )  # fmt: skip
    # every seed left at least one run resumable with RunResumed queued: hit <= SEEDS is reached
    hit = 1 + random.Random(f"pending:{mode}").randrange(SEEDS)
    window, _ = await resume_after_flushall(
        settings, sandbox, killed.targets, producer=producer, logs=logs, checkpoints=mode,
        kill=("resume_pending", hit), name="resume-killed",
    )  # fmt: skip
    code, out = await resume_after_flushall(
        settings, sandbox, killed.targets, producer=producer, logs=logs, checkpoints=mode
    )
    assert code == 0, f"the resuming worker failed: {out[-2000:]}"
    return Reference(killed.runs, {}), killed.exits, window


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
    await assert_as_uninterrupted(settings, sandbox, ref)
