"""Chaos with the projector's views: kill, FLUSHALL, ``views rebuild``, resume from Redis.

As the plain chaos suite, but after FLUSHALL the Redis views are rebuilt by replaying Kafka
(``agentledger views rebuild``, a separate process), a projector process keeps them current,
and the resuming worker loads every run from those views behind the resume barrier instead of
folding Kafka itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from agentledger.demo.plan import kill_target, reference, run_ids, verify
from agentledger.demo.runner import (
    flush_redis,
    performed_effects,
    read_views,
    spawn_forked,
    worker_command,
)
from agentledger.projector.testing import ProjectorProcess, projector_settings, settings_env
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.worker import WorkerSettings

from .test_kill_resume import RUNS_PER_SEED, SEEDS, merge, sandbox

pytestmark = pytest.mark.chaos
__all__ = ["sandbox"]  # the module-scoped sandbox fixture, shared


async def abort_dead_writer(settings: WorkerSettings, producer: str) -> None:
    """What a restarted worker does first: claim its transactional id, aborting the open
    transaction its SIGKILLed predecessor may have left (read_committed readers wait on it)."""
    client = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, transactional_id=producer)
    await client.start()
    await client.stop()


async def rebuild_views(settings: WorkerSettings, logs: Path) -> dict[str, object]:
    """Run ``agentledger views rebuild --json`` as its own process on the test's topics/keys."""
    env = {**os.environ, **settings_env(projector_settings(settings))}
    with (logs / "rebuild.log").open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentledger.cli", "views", "rebuild", "--json",
            env=env, stdout=asyncio.subprocess.PIPE, stderr=log,
        )  # fmt: skip
        out, _ = await proc.communicate()
    assert proc.returncode == 0, (logs / "rebuild.log").read_text()[-2000:]
    report: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
    return report


@pytest.mark.parametrize("kill_at", ["random-step"])
async def test_resume_from_rebuilt_views_after_sigkill_and_flushall(
    kill_at: str,
    ledger_settings: CommonSettings,
    sandbox: SandboxProcess,
    tmp_path: Path,
) -> None:
    """20 seeds killed; FLUSHALL; views rebuilt from Kafka; resumed from the views: exactly once."""
    settings = WorkerSettings(**{**ledger_settings.model_dump(), "state_dir": tmp_path})
    producer = f"chaos-views-{uuid.uuid4().hex[:8]}"
    refs, targets = [], []
    for seed in SEEDS:
        ids = run_ids(f"v-{kill_at}-{uuid.uuid4().hex[:6]}-s{seed}", RUNS_PER_SEED)
        ref = await reference(ids, seed)
        mine = [(run_id, seed) for run_id in ids]
        command = worker_command(
            settings, mine, url=sandbox.url, producer=producer,
            kill=kill_target(kill_at, seed, ref.hits), concurrency=4,
        )  # fmt: skip
        code, _ = await spawn_forked(command, tmp_path / f"seed-{seed}.log")
        assert code == -signal.SIGKILL
        refs.append(ref)
        targets += mine
    await flush_redis(settings, "all")
    await abort_dead_writer(settings, producer)
    await rebuild_views(settings, tmp_path)
    command = worker_command(
        settings, targets, url=sandbox.url, producer=producer, kill=None, concurrency=16,
        use_views=True,
    )  # fmt: skip
    group = f"{settings.key_prefix}-projector"
    async with ProjectorProcess(projector_settings(settings, projector_group=group)) as projector:
        await projector.wait_ready()
        code, out = await spawn_forked(command, tmp_path / "resume.log")
    assert code == 0, out
    outcome: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    started_fresh = [r for r, status in outcome.items() if "(new)" in status]
    from_views = [r for r, status in outcome.items() if "(views)" in status]
    assert len(from_views) + len(started_fresh) == len(targets)
    assert from_views, "at least the killed runs must resume from the rebuilt views"
    ref = merge(refs)
    report = verify(
        ref, await read_views(settings, list(ref.runs)), await performed_effects(sandbox.url)
    )
    assert report.mismatches == []
    assert (report.duplicates, report.lost, report.unexpected) == (0, 0, 0)
    assert report.finished == len(ref.runs)
