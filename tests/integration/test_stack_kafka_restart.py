"""Broker restarts for chaos tests: same port, same data, committed records survive."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from agentledger.bus.admin import ensure_topics
from agentledger.events.topics import TopicSpec
from agentledger.settings import CommonSettings
from agentledger.stack import Health, LocalStack, StackPaths

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOPIC = TopicSpec("restart.check", 1, 3_600_000, "delete", "steps")


@pytest_asyncio.fixture(loop_scope="session")
async def own_stack(tmp_path: Path, kafka_jar_cache: StackPaths) -> AsyncIterator[LocalStack]:
    """A stack of this test's own (jars copied from the session cache), stopped afterwards."""
    paths = StackPaths(tmp_path / "state")
    paths.kafka.mkdir(parents=True)
    shutil.copytree(kafka_jar_cache.jars, paths.jars)
    shutil.copy2(kafka_jar_cache.jar_manifest, paths.jar_manifest)
    async with LocalStack(paths.root) as stack:
        yield stack


async def _produce(bootstrap: str, value: bytes) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(TOPIC.name, value)
    finally:
        await producer.stop()


async def _read_all(bootstrap: str, expect: int) -> list[bytes]:
    consumer = AIOKafkaConsumer(
        TOPIC.name, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        while len(values) < expect:
            batch = await consumer.getmany(timeout_ms=10_000)
            if not batch:
                break
            values.extend(r.value for records in batch.values() for r in records if r.value)
    finally:
        await consumer.stop()
    return values


async def test_restart_keeps_port_and_data(own_stack: LocalStack) -> None:
    """After restart_kafka the broker answers on the same port and still has earlier records."""
    before = own_stack.endpoints
    settings = CommonSettings(kafka_bootstrap=before.kafka_bootstrap, redis_url=before.redis_url)
    await ensure_topics(settings, [TOPIC])
    await _produce(before.kafka_bootstrap, b"before")
    old_pid = own_stack.load().kafka

    after = await own_stack.restart_kafka()

    assert after == before
    new = own_stack.load().kafka
    assert new is not None
    assert old_pid is not None
    assert new.pid != old_pid.pid
    await _produce(after.kafka_bootstrap, b"after")
    assert await _read_all(after.kafka_bootstrap, 2) == [b"before", b"after"]


async def test_killed_broker_is_dead_until_started_again(own_stack: LocalStack) -> None:
    """A SIGKILLed broker shows as dead; start_kafka brings it back on the same endpoint."""
    before = own_stack.endpoints
    assert await own_stack.kill_kafka()
    status = await own_stack.status()
    assert status.kafka.health is Health.DEAD
    assert status.redis.health is Health.RUNNING
    assert await own_stack.start_kafka() == before
    assert (await own_stack.status()).kafka.health is Health.RUNNING
