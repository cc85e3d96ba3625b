"""Chaos: SIGKILL a real worker at each kill point over 20 seeds, FLUSHALL, resume cold, verify.

Per kill point: for every seed a worker process runs two refund runs and SIGKILLs itself at the
hit the seed picks; then Redis is flushed (FLUSHALL) and ONE brand-new process resumes all
runs. Worker processes are forked from a fork server that preloaded agentledger (new pids, no
state of the parent or of each other; only the interpreter start-up is shared). The sandbox
provider's ``GET /v1/effects`` must show every logical effect exactly once, and every run must
end with the outcome, step results and cost of an uninterrupted run.
"""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

import pytest

from agentledger.demo.plan import KILL_AT, Reference, kill_target, reference, run_ids
from agentledger.demo.runner import (
    flush_redis,
    spawn_forked,
    worker_command,
)
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.worker import WorkerSettings
from tests.chaos.kill_resume_support import assert_as_uninterrupted, sandbox

pytestmark = pytest.mark.chaos

SEEDS = range(20)
RUNS_PER_SEED = 2

__all__ = ["sandbox"]  # the module-scoped sandbox fixture, shared


def merge(refs: list[Reference]) -> Reference:
    """One reference over the runs of several seeds."""
    runs = {run_id: e for ref in refs for run_id, e in ref.runs.items()}
    return Reference(runs, {})


async def kill_then_resume(
    settings: WorkerSettings, sandbox: SandboxProcess, kill_at: str, logs: Path
) -> tuple[Reference, list[int]]:
    """Kill one worker per seed at ``kill_at``, flush Redis, resume all runs in one process."""
    producer = f"chaos-{uuid.uuid4().hex[:8]}"
    refs, exits = [], []
    targets: list[tuple[str, int]] = []
    for seed in SEEDS:
        ids = run_ids(f"{kill_at}-{uuid.uuid4().hex[:6]}-s{seed}", RUNS_PER_SEED)
        ref = await reference(ids, seed)
        kill = kill_target(kill_at, seed, ref.hits)
        mine = [(run_id, seed) for run_id in ids]
        command = worker_command(
            settings, mine, url=sandbox.url, producer=producer, kill=kill, concurrency=4
        )
        code, _ = await spawn_forked(command, logs / f"seed-{seed}.log")
        exits.append(code)
        refs.append(ref)
        targets += mine
    await flush_redis(settings, "all")
    command = worker_command(
        settings, targets, url=sandbox.url, producer=producer, kill=None, concurrency=16
    )
    code, out = await spawn_forked(command, logs / "resume.log")
    assert code == 0, f"the resuming worker failed: {out[-2000:]}"
    return merge(refs), exits


@pytest.mark.parametrize("kill_at", sorted(KILL_AT))
async def test_every_effect_exactly_once_after_sigkill_and_flushall(
    kill_at: str,
    ledger_settings: CommonSettings,
    sandbox: SandboxProcess,
    tmp_path: Path,
) -> None:
    """20 seeds killed at this point, resumed cold: no duplicate, no loss, same outcome/cost."""
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "state_dir": tmp_path})
    ref, exits = await kill_then_resume(settings, sandbox, kill_at, tmp_path)
    assert exits == [-signal.SIGKILL] * len(SEEDS), "every worker must die at its kill point"
    await assert_as_uninterrupted(settings, sandbox, ref)
