"""Redis wiped under a running projector (real Kafka and Redis): it heals by itself, says so
once, raises no false gap alert, and /health tells the truth."""

from __future__ import annotations

import asyncio
import tempfile

import pytest
import redis.asyncio as aioredis

from agentledger.events import Alert, Event, topic_names
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.testing import (
    ProjectorProcess,
    free_port,
    isolated_projector,
    read_events,
    until,
)
from agentledger.views.redis_store import RedisViewStore
from tests.conftest import StackUnderTest
from tests.integration.test_projector_recovery import (
    cli,
    private_redis,
    publish,
    runs_of,
    wrong_views,
)

pytestmark = pytest.mark.integration
__all__ = ["private_redis"]


async def alerts_of(settings: ProjectorSettings, *, want_wiped: int) -> list[Alert]:
    """The alerts published so far (read until ``want_wiped`` views.wiped alerts are seen)."""
    assert settings.kafka_bootstrap is not None

    def enough(found: list[Event]) -> bool:
        return sum(isinstance(e, Alert) and e.code == "views.wiped" for e in found) >= want_wiped

    found = await read_events(
        settings.kafka_bootstrap, topic_names(settings).alerts, want=enough, timeout_s=20
    )
    return [e for e in found if isinstance(e, Alert)]


@pytest.mark.parametrize("when", ["just_after_start", "after_first_views", "mid_run"])
async def test_flushall_under_a_running_projector_heals_with_one_alert(
    stack: StackUnderTest, private_redis: str, when: str
) -> None:
    """FLUSHALL while the projector catches up (just after its start, or once its first views
    are written) or between two halves of runs: the live views become exactly a rebuild of
    the log again, `views verify` agrees, one views.wiped alert is raised and no projector.gap."""
    async with isolated_projector(
        stack.kafka_bootstrap, private_redis, projector_batch_max=200, projector_gap_alert_ms=500
    ) as settings:
        runs = runs_of(f"w{when[:3]}", 300, steps=2)
        client = aioredis.Redis.from_url(private_redis)
        try:
            async with (
                RedisViewStore.from_url(
                    private_redis, key_prefix=settings.key_prefix, retention_ms=settings.retention
                ) as store,
                ProjectorProcess(settings) as proc,
            ):
                if when == "mid_run":
                    await proc.wait_ready()
                    await publish(settings, {r: e[:6] for r, e in runs.items()})
                    firsts = {r: e[:6] for r, e in runs.items()}
                    done = await until(lambda: wrong_views(store, firsts), lambda w: not w, 90)
                    assert done == []
                    await client.flushall()
                    await publish(settings, {r: e[6:] for r, e in runs.items()})
                else:
                    await publish(settings, runs)
                    await proc.wait_ready()
                    if when == "after_first_views":
                        await until(proc.metrics, lambda m: int(m["events_applied"]) > 0, 60)
                    else:
                        await until(store.live_namespace, lambda n: n is not None, 60)
                    await client.flushall()
                assert await until(lambda: wrong_views(store, runs), lambda w: not w, 120) == []
                code, out = await cli(settings, "views", "verify")
                assert code == 0, out
                alerts = await alerts_of(settings, want_wiped=1)
        finally:
            await client.aclose()
        assert [a.code for a in alerts if a.code == "views.wiped"] == ["views.wiped"]
        assert [a for a in alerts if a.code == "projector.gap"] == []


async def test_namespace_keys_deleted_under_a_live_pointer_heal_without_gap_alerts(
    stack: StackUnderTest, private_redis: str
) -> None:
    """Every key of the live namespace deleted by a prefix scan while the pointer stays (as
    `redis-cli --scan | xargs DEL` or eviction would): the projector writes nothing on top of
    the hole, re-projects the log, raises one views.wiped and no projector.gap alert."""
    async with isolated_projector(
        stack.kafka_bootstrap, private_redis, projector_batch_max=200, projector_gap_alert_ms=500
    ) as settings:
        runs = runs_of("wdel", 200, steps=2)
        firsts = {r: e[:6] for r, e in runs.items()}
        async with (
            RedisViewStore.from_url(
                private_redis, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            ProjectorProcess(settings) as proc,
        ):
            await proc.wait_ready()
            await publish(settings, firsts)
            assert await until(lambda: wrong_views(store, firsts), lambda w: not w, 90) == []
            namespace = await store.live_namespace()
            assert namespace is not None
            pattern = store.keys.space(namespace).pattern
            doomed = [k async for k in store.client.scan_iter(match=pattern, count=1000)]
            await store.client.delete(*doomed)
            await publish(settings, {r: e[6:] for r, e in runs.items()})
            assert await until(lambda: wrong_views(store, runs), lambda w: not w, 60) == []
            code, out = await cli(settings, "views", "verify")
            assert code == 0, out
            alerts = await alerts_of(settings, want_wiped=1)
        assert [a.code for a in alerts if a.code == "views.wiped"] == ["views.wiped"]
        assert [a for a in alerts if a.code == "projector.gap"] == []


async def redis_server(port: int) -> asyncio.subprocess.Process:
    """A redis-server of this test alone on ``port``, answering."""
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
        tempfile.mkdtemp(prefix="al-redis-"),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    client = aioredis.Redis.from_url(f"redis://127.0.0.1:{port}/0")
    try:
        for _ in range(100):
            try:
                await client.ping()
                break
            except (OSError, aioredis.ConnectionError):
                await asyncio.sleep(0.05)
    finally:
        await client.aclose()
    return proc


async def test_health_fails_while_redis_is_down_or_a_partition_is_wedged(
    stack: StackUnderTest,
) -> None:
    """/health is 503 naming the cause while batches keep failing (a stalled projector,
    alerted once) and while Redis is down, when /metrics still answers; 200 once healed."""
    port = free_port()
    server = await redis_server(port)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        async with (
            isolated_projector(stack.kafka_bootstrap, url) as settings,
            RedisViewStore.from_url(url, key_prefix=settings.key_prefix) as store,
            ProjectorProcess(settings) as proc,
        ):
            await proc.wait_ready()
            status, body = await until(proc.health, lambda h: h[0] == 200, 60)
            assert (status, body["problems"]) == (200, [])
            namespace = await until(store.live_namespace, lambda n: n is not None, 30)
            assert namespace is not None
            progress = store.keys.space(namespace).progress()
            await store.client.delete(progress)
            await store.client.set(progress, "not a hash")  # every index write fails now
            await publish(settings, runs_of("h", 5))
            status, body = await until(proc.health, lambda h: h[0] == 503, 90)
            assert any("failing" in p for p in body["problems"]), body
            alerts = await read_events(
                str(settings.kafka_bootstrap),
                topic_names(settings).alerts,
                want=lambda found: any(
                    isinstance(e, Alert) and e.code == "projector.stalled" for e in found
                ),
            )
            assert [e.code for e in alerts if isinstance(e, Alert)].count("projector.stalled") == 1
            await store.client.delete(progress)
            status, body = await until(proc.health, lambda h: h[0] == 200, 90)
            assert status == 200, body
            server.kill()
            await server.wait()
            status, body = await until(proc.health, lambda h: h[0] == 503, 30)
            assert any("redis unreachable" in p for p in body["problems"]), body
            metrics = await proc.metrics()
            assert metrics["parked_runs"] is None
            server = await redis_server(port)
            status, body = await until(proc.health, lambda h: h[0] == 200, 60)
            assert status == 200, body
    finally:
        if server.returncode is None:
            server.kill()
        await server.wait()


async def test_health_fails_on_an_instance_with_no_partitions(stack: StackUnderTest) -> None:
    """Of two projectors on one-partition topics, the one the group gave nothing answers 503
    "no partitions assigned" while the other is healthy."""
    async with (
        isolated_projector(stack.kafka_bootstrap, stack.redis_url, run_partitions=1) as settings,
        ProjectorProcess(settings, name="a") as a,
        ProjectorProcess(settings, name="b") as b,
    ):
        await a.wait_ready()
        await b.wait_ready()

        async def both() -> list[tuple[int, dict[str, object]]]:
            return [await a.health(), await b.health()]

        found = await until(both, lambda h: sorted(s for s, _ in h) == [200, 503], 90)
        assert sorted(s for s, _ in found) == [200, 503]
        (idle,) = [body for status, body in found if status == 503]
        assert idle["problems"] == ["no partitions assigned"]
