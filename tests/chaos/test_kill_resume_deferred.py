"""Chaos: checkpoints that ride with the next commit, SIGKILLed inside the window they open.

With ``checkpoints=with_next_commit`` a step returns while its checkpoint is only queued. A
real worker process is SIGKILLed right there (kill point ``checkpoint_pending``, a hit picked
per seed among every hit of the uninterrupted reference) or at any kill point; Redis is
flushed (FLUSHALL: the run index is gone too, so the resume reads the log) and ONE brand-new
process resumes every run in the same mode. The sandbox provider must show every logical
effect exactly once and every run must end with the outcome, step results and cost of an
uninterrupted run — the same verification as test_kill_resume.
"""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest

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

MODE = "with_next_commit"
#: kill point -> seeds (the new window gets the most).
POINTS = {"checkpoint_pending": 12, "any": 6}


async def kill_then_resume(
    settings: WorkerSettings, sandbox: SandboxProcess, point: str, logs: Path
) -> tuple[Reference, list[int]]:
    """Kill one worker per seed at ``point``, flush Redis, resume all runs in one process."""
    producer = f"chaos-deferred-{uuid.uuid4().hex[:8]}"
    killed = await kill_one_worker_per_seed(
        settings, sandbox, seeds=POINTS[point], point=point, label=point, hit_key=f"kill:{point}",
        producer=producer, logs=logs, checkpoints=MODE,
    )  # fmt: skip
    code, out = await resume_after_flushall(
        settings, sandbox, killed.targets, producer=producer, logs=logs, checkpoints=MODE
    )
    assert code == 0, f"the resuming worker failed: {out[-2000:]}"
    return Reference(killed.runs, {}), killed.exits


@pytest.mark.parametrize("point", sorted(POINTS))
async def test_queued_checkpoints_lose_no_effect_and_repeat_none_after_sigkill(
    point: str,
    ledger_settings: CommonSettings,
    sandbox: SandboxProcess,
    tmp_path: Path,
) -> None:
    """Killed with a checkpoint queued (or anywhere), resumed cold after FLUSHALL: no
    duplicate, no loss, same outcome and cost as an uninterrupted run."""
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "state_dir": tmp_path})
    ref, exits = await kill_then_resume(settings, sandbox, point, tmp_path)
    assert exits == [-signal.SIGKILL] * POINTS[point], "every worker must die at its kill point"
    await assert_as_uninterrupted(settings, sandbox, ref)
