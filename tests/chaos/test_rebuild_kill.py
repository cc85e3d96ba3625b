"""A rebuild SIGKILLed halfway through a slice of plain commands, on the real stack."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from agentledger.events import topic_names
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.rebuild import compare, replay_into_new_namespace
from agentledger.projector.testing import (
    ProjectorProcess,
    isolated_projector,
    settings_env,
    until,
)
from agentledger.views.redis_store import RedisViewStore
from tests.conftest import StackUnderTest
from tests.integration.test_projector_recovery import publish, runs_of, wrong_views

pytestmark = pytest.mark.chaos

#: A rebuild in this process whose second write sends half its commands' bytes to Redis, waits
#: until Redis has run the whole commands among them, and dies as kill -9 would.
CHILD = """
import asyncio, os, signal
from agentledger.events import topic_names
from agentledger.projector import bulk
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.rebuild import replay_into_new_namespace
from agentledger.projector.settings import ProjectorSettings
from agentledger.views import redis_store
from agentledger.views.redis_store import RedisViewStore

bulk.WRITE_SLICE = 10
original = redis_store.send_packed
calls = []

async def cut(client, payload, replies):
    calls.append(replies)
    if len(calls) < 2:
        return await original(client, payload, replies)
    conn = await client.connection_pool.get_connection()
    await conn.send_packed_command(payload[: len(payload) // 2], check_health=False)
    await asyncio.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)

redis_store.send_packed = cut

async def main():
    s = ProjectorSettings()
    async with (
        RedisViewStore.from_url(s.redis_url, key_prefix=s.key_prefix) as store,
        KafkaLogReader(s.kafka_bootstrap) as reader,
    ):
        await replay_into_new_namespace(
            store, reader, topic_names(s).run_topics, partitions=s.run_partitions
        )

asyncio.run(main())
"""


async def test_a_rebuild_killed_mid_slice_leaves_the_live_views_and_a_next_rebuild_whole(
    stack: StackUnderTest,
) -> None:
    """A rebuild SIGKILLed after half of a slice's commands reached Redis leaves the live
    pointer and views as they were, and its namespace with some runs but no progress (never
    live); the next rebuild equals the live views key for key."""
    async with isolated_projector(stack.kafka_bootstrap, stack.redis_url) as settings:
        assert settings.kafka_bootstrap is not None
        assert settings.redis_url is not None
        runs = runs_of("k", 80, steps=2)
        async with (
            RedisViewStore.from_url(
                settings.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            KafkaLogReader(settings.kafka_bootstrap) as reader,
        ):
            async with ProjectorProcess(settings) as proc:
                await proc.wait_ready()
                await publish(settings, runs)
                assert await until(lambda: wrong_views(store, runs), lambda w: not w, 90) == []
            live = await store.live_namespace()
            assert live is not None
            before = await store.snapshot(live)
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CHILD, env=settings_env(settings)
            )
            assert await asyncio.wait_for(child.wait(), 120) == -signal.SIGKILL
            assert await store.live_namespace() == live
            assert await store.snapshot(live) == before
            (orphan,) = set(await store.namespaces()) - {live}
            assert await store.snapshot(orphan)  # the kill landed after writes began
            assert await store.read_progress(orphan) == {}
            replay = await replay_into_new_namespace(
                store,
                reader,
                topic_names(settings).run_topics,
                partitions=settings.run_partitions,
            )
            result = compare(before, await store.snapshot(replay.namespace))
            assert result.differences == []
            assert result.keys_compared > len(runs)
            await store.drop_namespace(orphan)
            await store.drop_namespace(replay.namespace)
