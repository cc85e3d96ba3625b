"""A poison record near 1 MiB on a run topic (real Kafka and Redis): dead-lettered once, cut to
fit, and its partition goes on."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaProducer

from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.events import DeadLettered, Event, topic_names
from agentledger.projector.findings import DEAD_LETTER_VALUE_MAX
from agentledger.projector.testing import (
    ProjectorProcess,
    expected_view,
    isolated_projector,
    read_events,
    sample_run,
    until,
)
from agentledger.views.redis_store import RedisViewStore
from tests.conftest import StackUnderTest

pytestmark = pytest.mark.integration


async def test_a_huge_poison_record_is_dead_lettered_once_and_the_partition_goes_on(
    stack: StackUnderTest,
) -> None:
    """Eight small poison records and one of ~1 MiB ahead of a run's events: the run's view is
    applied, each record is dead-lettered exactly once, the big one cut to fit with a reference."""
    async with isolated_projector(stack.kafka_bootstrap, stack.redis_url) as settings:
        assert settings.kafka_bootstrap is not None
        assert settings.redis_url is not None
        topics = topic_names(settings)
        run = f"big-{uuid.uuid4().hex[:6]}"
        part = partition_for(run_key(run), settings.run_partitions)
        poison = [b"junk %d" % i for i in range(8)] + [b"\xff" * 1_048_400]
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            for value in poison:
                await producer.send_and_wait(topics.steps, value, key=run_key(run), partition=part)
        finally:
            await producer.stop()
        events = sample_run(run, steps=1)
        async with (
            KafkaEventLog(settings, transactional_id=f"{run}-tx") as log,
            RedisViewStore.from_url(settings.redis_url, key_prefix=settings.key_prefix) as store,
            ProjectorProcess(settings) as proc,
        ):
            await log.publish(events)
            await proc.wait_ready()
            view = await until(lambda: store.load(run), lambda v: v == expected_view(events), 90)
            assert view == expected_view(events)
            steps_lag = f"{topics.steps}:{part}"
            caught_up = await until(proc.metrics, lambda m: m["lag"].get(steps_lag, 1) == 0, 30)
            assert caught_up["lag"].get(steps_lag, 1) == 0, caught_up["lag"]

            def mine(found: list[Event]) -> list[DeadLettered]:
                return [e for e in found if isinstance(e, DeadLettered) and e.key == run_key(run)]

            letters = mine(
                await read_events(
                    settings.kafka_bootstrap,
                    topics.deadletter,
                    want=lambda found: len(mine(found)) > len(poison),
                    timeout_s=5,
                )
            )
        assert len(letters) == len(poison)
        (big,) = [d for d in letters if d.value is not None and d.value.startswith(b"\xff")]
        assert big.value is not None
        assert len(big.value) == DEAD_LETTER_VALUE_MAX
        assert f"of {len(poison[-1])} bytes" in big.reason
        assert f"{topics.steps}:{part}@{big.source_offset}" in big.reason
