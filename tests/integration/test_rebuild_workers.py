"""A rebuild folded in worker processes on the real stack: equal to the live views, or nothing."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaProducer

from agentledger.bus.partitioning import partition_for, run_key
from agentledger.errors import RebuildWorkerError
from agentledger.events import EventCodec, topic_names
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.rebuild import compare, replay_into_new_namespace, wait_for_progress
from agentledger.projector.testing import (
    ProjectorProcess,
    free_port,
    isolated_projector,
    sample_run,
    until,
)
from agentledger.projector.workers import ProcessReplayer
from agentledger.views.redis_store import RedisViewStore
from tests.conftest import StackUnderTest
from tests.integration.test_projector_recovery import publish, runs_of, wrong_views

pytestmark = pytest.mark.integration


async def test_a_rebuild_in_two_worker_processes_equals_the_live_views_key_for_key(
    stack: StackUnderTest,
) -> None:
    """Two processes, each folding half of the partition numbers into one fresh namespace, give
    the live projector's views key for key (indexes, TTLs), dead-letter the garbage and the
    record off its key's partition, and the parent records the log ends as its progress."""
    async with isolated_projector(stack.kafka_bootstrap, stack.redis_url) as settings:
        assert settings.kafka_bootstrap is not None
        assert settings.redis_url is not None
        topics = topic_names(settings)
        runs = runs_of("w", 120, steps=2)
        stray = sample_run(f"stray-{uuid.uuid4().hex[:6]}", steps=1)
        home = partition_for(run_key(stray[0].run_id), settings.run_partitions)
        producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(topics.steps, b"not avro", key=b"x", partition=0)
            await producer.send_and_wait(
                topics.steps,
                EventCodec().encode(stray[0]),
                key=run_key(stray[0].run_id),
                partition=(home + 1) % settings.run_partitions,
            )
        finally:
            await producer.stop()
        async with (
            RedisViewStore.from_url(
                settings.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            KafkaLogReader(settings.kafka_bootstrap) as reader,
            ProjectorProcess(settings) as proc,
        ):
            await proc.wait_ready()
            await publish(settings, runs)
            assert await until(lambda: wrong_views(store, runs), lambda w: not w, 90) == []
            live = await store.live_namespace()
            assert live is not None
            replay = await replay_into_new_namespace(
                store,
                reader,
                topics.run_topics,
                partitions=settings.run_partitions,
                replayer=ProcessReplayer(settings, workers=2),
            )
            assert await wait_for_progress(store, live, replay.ends, 60)
            result = compare(await store.snapshot(live), await store.snapshot(replay.namespace))
            assert result.differences == []
            assert result.keys_compared > len(runs)
            assert replay.records == sum(len(e) for e in runs.values()) + 2
            assert replay.dead_letters == 2
            assert await store.read_progress(replay.namespace) == {
                tp: end for tp, end in replay.ends.items() if end > 0
            }
            assert await store.live_namespace() == live
            await store.drop_namespace(replay.namespace)


async def test_a_failing_worker_fails_the_rebuild_and_leaves_the_live_views_alone(
    stack: StackUnderTest,
) -> None:
    """Workers that cannot reach Redis fail the rebuild with the worker's own error: the half
    built namespace is deleted, the live namespace stays the one readers see."""
    async with isolated_projector(stack.kafka_bootstrap, stack.redis_url) as settings:
        assert settings.kafka_bootstrap is not None
        assert settings.redis_url is not None
        runs = runs_of("x", 40)
        await publish(settings, runs)
        broken = settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{free_port()}/0"})
        async with (
            RedisViewStore.from_url(
                settings.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            KafkaLogReader(settings.kafka_bootstrap) as reader,
        ):
            live = await store.live_namespace(create=True)
            before = await store.namespaces()
            with pytest.raises(RebuildWorkerError, match="UnreachableError"):
                await replay_into_new_namespace(
                    store,
                    reader,
                    topic_names(settings).run_topics,
                    partitions=settings.run_partitions,
                    replayer=ProcessReplayer(broken, workers=2),
                )
            assert await store.live_namespace() == live
            assert await store.namespaces() == before
