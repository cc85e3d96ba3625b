"""Shared by the chaos tests of queued writes (test_kill_resume_deferred, _pending): the
module's sandbox, one worker process per seed SIGKILLed at a kill point, the cold resume after
FLUSHALL, and the verification every such test ends with."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
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
from agentledger.worker import WorkerSettings

RUNS_PER_SEED = 2


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SandboxProcess]:
    """One sandbox provider process (its own SQLite file) for the whole module."""
    db = tmp_path_factory.mktemp("sandbox") / "effects.db"
    async with SandboxProcess(db) as process:
        yield process


@dataclass
class Killed:
    """What the killed workers leave: each run as an uninterrupted one ends, each worker's exit
    code, and the (run id, seed) pairs to resume."""

    runs: dict[str, Expected] = field(default_factory=dict)
    exits: list[int] = field(default_factory=list)
    targets: list[tuple[str, int]] = field(default_factory=list)


async def kill_one_worker_per_seed(
    settings: WorkerSettings,
    sandbox: SandboxProcess,
    *,
    seeds: int,
    point: str,
    label: str,
    hit_key: str,
    producer: str,
    logs: Path,
    checkpoints: Checkpoints = "each_step",
) -> Killed:
    """For each seed one worker process runs RUNS_PER_SEED runs (ids under ``label``) in
    ``checkpoints`` mode and is SIGKILLed at ``point``, at the hit that
    ``random.Random(f"{hit_key}:{seed}")`` picks among the hits of the uninterrupted reference."""
    killed = Killed()
    for seed in range(seeds):
        ids = run_ids(f"{label}-{uuid.uuid4().hex[:6]}-s{seed}", RUNS_PER_SEED)
        ref = await reference(ids, seed, checkpoints=checkpoints)
        hits = ref.hits.get(point, 0)
        assert hits > 0, f"the reference never reaches {point}"
        hit = 1 + random.Random(f"{hit_key}:{seed}").randrange(hits)
        mine = [(run_id, seed) for run_id in ids]
        command = worker_command(
            settings, mine, url=sandbox.url, producer=producer, kill=(point, hit),
            concurrency=4, checkpoints=checkpoints,
        )  # fmt: skip
        code, _ = await spawn_forked(command, logs / f"seed-{seed}.log")
        killed.exits.append(code)
        killed.runs.update(ref.runs)
        killed.targets += mine
    return killed


async def resume_after_flushall(
    settings: WorkerSettings,
    sandbox: SandboxProcess,
    targets: list[tuple[str, int]],
    *,
    producer: str,
    logs: Path,
    checkpoints: Checkpoints,
    kill: tuple[str, int] | None = None,
    name: str = "resume",
) -> tuple[int, str]:
    """FLUSHALL (the run index goes too: the resume reads the log), then ONE brand-new worker
    process resumes every run of ``targets`` in ``checkpoints`` mode (SIGKILLed at ``kill``
    when given); its exit code and output (log ``name``)."""
    await flush_redis(settings, "all")
    command = worker_command(
        settings, targets, url=sandbox.url, producer=producer, kill=kill, concurrency=16,
        checkpoints=checkpoints,
    )  # fmt: skip
    return await spawn_forked(command, logs / f"{name}.log")


async def assert_as_uninterrupted(
    settings: WorkerSettings, sandbox: SandboxProcess, ref: Reference
) -> None:
    """Every logical effect performed exactly once, every run finished with the outcome, step
    results and cost of an uninterrupted run (the verification of test_kill_resume)."""
    views = await read_views(settings, list(ref.runs))
    report = verify(ref, views, await performed_effects(sandbox.url))
    assert report.mismatches == []
    assert (report.duplicates, report.lost, report.unexpected) == (0, 0, 0)
    assert report.effects_performed == report.effects_expected
    assert report.finished == len(ref.runs)
    assert (report.tokens, report.usd) == (report.expected_tokens, report.expected_usd)
