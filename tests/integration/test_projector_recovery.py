"""Recovery on the real stack: SIGKILL mid-batch, FLUSHALL then rebuild, verify finding damage."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from aiokafka import AIOKafkaConsumer, TopicPartition

from agentledger.bus.kafka import KafkaEventLog
from agentledger.events import RunEvent, topic_names
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.testing import (
    ProjectorProcess,
    expected_view,
    free_port,
    isolated_projector,
    sample_run,
    settings_env,
    until,
)
from agentledger.views.model import RunView
from agentledger.views.redis_store import RedisViewStore
from tests.conftest import StackUnderTest

pytestmark = pytest.mark.integration


@pytest_asyncio.fixture(loop_scope="session")
async def private_redis() -> AsyncIterator[str]:
    """A redis-server of this test alone, so FLUSHALL cannot touch anybody else's keys."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="al-redis-")
    proc = await asyncio.create_subprocess_exec(
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        workdir,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = aioredis.Redis.from_url(url)
    try:
        for _ in range(100):
            try:
                await client.ping()
                break
            except (OSError, aioredis.ConnectionError):
                await asyncio.sleep(0.05)
        yield url
    finally:
        await client.aclose()
        proc.kill()
        await proc.wait()


async def publish(settings: ProjectorSettings, runs: dict[str, list[RunEvent]]) -> None:
    """Publish each run in two transactions, many runs at once."""
    async with KafkaEventLog(settings, transactional_id=f"rec-{uuid.uuid4().hex[:6]}") as log:
        pending = []
        for events in runs.values():
            pending.append(log.publish(events[:3]))
            pending.append(log.publish(events[3:]))
        for i in range(0, len(pending), 64):
            await asyncio.gather(*pending[i : i + 64])


async def wrong_views(store: RedisViewStore, runs: dict[str, list[RunEvent]]) -> list[str]:
    """Runs whose live view is not (yet) the fold of their events."""
    namespace = await store.live_namespace()
    if namespace is None:
        return sorted(runs)
    found: dict[str, RunView] = {}
    ids = sorted(runs)
    for i in range(0, len(ids), 200):
        stored = await store.load_runs(namespace, ids[i : i + 200])
        found.update({r: s.view for r, s in stored.items()})
    return [r for r in ids if found.get(r) != expected_view(runs[r])]


async def applied_events(store: RedisViewStore, runs: dict[str, list[RunEvent]]) -> int:
    """Events the live views hold: each run's applied seq (its seqs are gapless from 1)."""
    namespace = await store.live_namespace()
    if namespace is None:
        return 0
    ids = sorted(runs)
    applied = 0
    for i in range(0, len(ids), 200):
        stored = await store.load_runs(namespace, ids[i : i + 200])
        applied += sum(s.view.applied_seq for s in stored.values())
    return applied


async def cli(settings: ProjectorSettings, *args: str) -> tuple[int, str]:
    """Run ``agentledger <args>`` as a child process with ``settings``; return (code, stdout)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(settings_env(settings))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentledger.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=180)
    assert proc.returncode is not None
    if proc.returncode not in (0, 1):
        pytest.fail(f"agentledger {' '.join(args)} exited {proc.returncode}: {err.decode()}")
    return proc.returncode, out.decode()


def runs_of(prefix: str, n: int, steps: int = 1) -> dict[str, list[RunEvent]]:
    return {f"{prefix}{i:04d}": sample_run(f"{prefix}{i:04d}", steps=steps) for i in range(n)}


async def test_sigkill_mid_batch_then_restart_applies_every_event_exactly_once(
    stack: StackUnderTest,
) -> None:
    """A projector SIGKILLed while it works through a backlog is replaced by one that finishes
    it: every view equals the fold of its events (costs counted once, nothing parked)."""
    async with isolated_projector(
        stack.kafka_bootstrap, stack.redis_url, projector_batch_max=300
    ) as settings:
        runs = runs_of("k", 2000)  # a backlog of many more batches than the first one applies
        total = sum(len(e) for e in runs.values())
        await publish(settings, runs)
        assert settings.redis_url is not None
        async with RedisViewStore.from_url(
            settings.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
        ) as store:
            # armed: it SIGKILLs itself once its second batch is in Redis, before its positions
            # (so the group's offsets) move past it (DESIGN.md §16). A batch holds about one of
            # the 4 partition numbers (whole numbers, ~300 records cap), a catch-up chunk 300
            # records: two never hold the whole backlog, and the first holds a run's start
            kill = {"projector_kill_point": "batch_committed", "projector_kill_hit": 2}
            armed = settings.model_copy(update={**kill, "projector_chunk": 300})
            async with ProjectorProcess(armed, name="killed") as first:
                assert await first.wait(timeout_s=120) == -signal.SIGKILL
            seen = {"events_applied": await applied_events(store, runs)}
            assert 0 < seen["events_applied"] < total
            async with ProjectorProcess(settings, name="successor") as second:
                await second.wait_ready()
                wrong = await until(lambda: wrong_views(store, runs), lambda w: not w, 120)
                assert wrong == []
                namespace = await store.live_namespace()
                assert namespace is not None
                assert await store.overdue_parked(namespace, 2**62) == []


async def test_flushall_then_rebuild_restores_the_views_key_for_key_while_live(
    stack: StackUnderTest, private_redis: str
) -> None:
    """After FLUSHALL, `views rebuild` brings back exactly the views Redis held, while the live
    projector keeps serving; new events after the swap land in the rebuilt views."""
    async with isolated_projector(stack.kafka_bootstrap, private_redis) as settings:
        runs = runs_of("f", 200, steps=2)
        more = runs_of("m", 50)
        async with (
            RedisViewStore.from_url(
                private_redis, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            ProjectorProcess(settings) as proc,
        ):
            await proc.wait_ready()
            await publish(settings, runs)
            assert await until(lambda: wrong_views(store, runs), lambda w: not w, 90) == []
            before_ns = await store.live_namespace()
            assert before_ns is not None
            before = await store.snapshot(before_ns)
            await store.client.flushall()
            code, out = await cli(settings, "views", "rebuild")
            assert code == 0, out
            after_ns = await store.live_namespace()
            assert after_ns is not None
            assert await store.snapshot(after_ns) == before
            await publish(settings, more)
            assert await until(lambda: wrong_views(store, more), lambda w: not w, 60) == []
            assert await wrong_views(store, runs) == []
            code, out = await cli(settings, "views", "verify")
            assert code == 0, out
            assert "0 difference(s)" in out


async def test_verify_reports_a_damaged_view_and_exits_non_zero(stack: StackUnderTest) -> None:
    """A view changed behind the projector's back is found by `views verify`, key and field."""
    async with isolated_projector(stack.kafka_bootstrap, stack.redis_url) as settings:
        runs = runs_of("v", 20)
        assert settings.redis_url is not None
        async with (
            RedisViewStore.from_url(
                settings.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            ProjectorProcess(settings) as proc,
        ):
            await proc.wait_ready()
            await publish(settings, runs)
            assert await until(lambda: wrong_views(store, runs), lambda w: not w, 60) == []
            namespace = await store.live_namespace()
            assert namespace is not None
            damaged = store.keys.space(namespace).run("v0007")
            await store.client.hset(damaged, "status", "running")
            code, out = await cli(settings, "views", "verify")
        assert code == 1
        assert "{v0007}:run [status]: live=running rebuilt=succeeded" in out
        assert "1 difference(s)" in out


async def test_group_offsets_ahead_of_redis_are_not_trusted(stack: StackUnderTest) -> None:
    """With the group's Kafka offsets committed past everything but Redis empty (a crash after
    faust's commit, before the write), the projector reads the records back from the log."""
    async with isolated_projector(stack.kafka_bootstrap, stack.redis_url) as settings:
        runs = runs_of("c", 50)
        await publish(settings, runs)
        assert settings.kafka_bootstrap is not None
        assert settings.redis_url is not None
        committer = AIOKafkaConsumer(
            bootstrap_servers=settings.kafka_bootstrap,
            group_id=settings.projector_group,
            enable_auto_commit=False,
            isolation_level="read_committed",
        )
        await committer.start()
        try:
            tps = [
                TopicPartition(t, p)
                for t in topic_names(settings).run_topics
                for p in range(settings.run_partitions)
            ]
            ends = await committer.end_offsets(tps)
            committer.assign(tps)
            await committer.commit({tp: offset for tp, offset in ends.items()})
        finally:
            await committer.stop()
        async with (
            RedisViewStore.from_url(
                settings.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            ProjectorProcess(settings) as proc,
        ):
            await proc.wait_ready()
            assert await until(lambda: wrong_views(store, runs), lambda w: not w, 60) == []
