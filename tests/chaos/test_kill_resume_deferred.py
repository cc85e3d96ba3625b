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

import random
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

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

RUNS_PER_SEED = 2
MODE = "with_next_commit"
#: kill point -> seeds (the new window gets the most).
POINTS = {"checkpoint_pending": 12, "any": 6}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SandboxProcess]:
    """One sandbox provider process (its own SQLite file) for the whole module."""
    db = tmp_path_factory.mktemp("sandbox") / "effects.db"
    async with SandboxProcess(db) as process:
        yield process


async def kill_then_resume(
    settings: WorkerSettings, sandbox: SandboxProcess, point: str, logs: Path
) -> tuple[Reference, list[int]]:
    """Kill one worker per seed at ``point``, flush Redis, resume all runs in one process."""
    producer = f"chaos-deferred-{uuid.uuid4().hex[:8]}"
    runs: dict[str, Expected] = {}
    exits: list[int] = []
    targets: list[tuple[str, int]] = []
    for seed in range(POINTS[point]):
        ids = run_ids(f"{point}-{uuid.uuid4().hex[:6]}-s{seed}", RUNS_PER_SEED)
        ref = await reference(ids, seed, checkpoints=MODE)
        hits = ref.hits.get(point, 0)
        assert hits > 0, f"the reference never reaches {point}"
        hit = 1 + random.Random(f"kill:{point}:{seed}").randrange(hits)
        mine = [(run_id, seed) for run_id in ids]
        command = worker_command(
            settings,
            mine,
            url=sandbox.url,
            producer=producer,
            kill=(point, hit),
            concurrency=4,
            checkpoints=MODE,
        )
        code, _ = await spawn_forked(command, logs / f"seed-{seed}.log")
        exits.append(code)
        runs.update(ref.runs)
        targets += mine
    await flush_redis(settings, "all")
    command = worker_command(
        settings,
        targets,
        url=sandbox.url,
        producer=producer,
        kill=None,
        concurrency=16,
        checkpoints=MODE,
    )
    code, out = await spawn_forked(command, logs / "resume.log")
    assert code == 0, f"the resuming worker failed: {out[-2000:]}"
    return Reference(runs, {}), exits


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
    views = await read_views(settings, list(ref.runs))
    report = verify(ref, views, await performed_effects(sandbox.url))
    assert report.mismatches == []
    assert (report.duplicates, report.lost, report.unexpected) == (0, 0, 0)
    assert report.effects_performed == report.effects_expected
    assert report.finished == len(ref.runs)
    assert (report.tokens, report.usd) == (report.expected_tokens, report.expected_usd)
