"""AgentLedgerSaver on the real Kafka and Redis: LangGraph's conformance suite, reads from the
projector's views, and a cold restore from Kafka alone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from redis.asyncio import Redis

from agentledger._core.loader import fold_log
from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.port import EventLog, Position
from agentledger.events import Event, RunEvent
from agentledger.integrations.langgraph import AgentLedgerSaver
from agentledger.leasing import RedisLeaseStore
from agentledger.projector.testing import ProjectorProcess, projector_settings, until
from agentledger.settings import CommonSettings
from agentledger.views.redis_store import RedisViewStore
from tests.langgraph_support import chat_graph, chat_input, saver_settings, thread_config

pytestmark = pytest.mark.integration


class CountingLog(EventLog):
    """The real Kafka log, counting how often a whole run is read back from Kafka."""

    def __init__(self, inner: EventLog) -> None:
        self.inner = inner
        self.run_reads = 0

    async def publish(self, events: Sequence[Event]) -> None:
        """Publish through Kafka."""
        await self.inner.publish(events)

    async def read_run(
        self, run_id: str, *, since: Mapping[tuple[str, int], int] | None = None
    ) -> list[RunEvent]:
        """Read the run from Kafka, counted."""
        self.run_reads += 1
        return await self.inner.read_run(run_id, since=since)

    async def run_end_positions(self, run_id: str) -> list[Position]:
        """Kafka's end offsets of the run's partitions."""
        return await self.inner.run_end_positions(run_id)


async def wipe_redis(settings: CommonSettings) -> None:
    """Delete every Redis key of this test (views, leases, indexes): a cold machine."""
    assert settings.redis_url is not None
    client = Redis.from_url(settings.redis_url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{settings.key_prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


async def test_langgraph_conformance_suite_passes_on_kafka_and_redis(
    ledger_settings: CommonSettings,
) -> None:
    """LangGraph's checkpointer conformance suite passes every base capability and the extended
    ones (copy_thread, delete_for_runs, prune) with Kafka and Redis underneath."""
    settings = saver_settings(ledger_settings)

    @checkpointer_test(name="AgentLedgerSaver")
    async def factory() -> AsyncIterator[BaseCheckpointSaver[str]]:
        async with AgentLedgerSaver.from_settings(settings) as saver:
            yield saver

    report = await validate(factory)
    assert report.passed_all_base(), report.to_dict()
    assert report.passed_all(), report.to_dict()
    assert report.conformance_level() == "FULL"


async def test_a_new_process_reads_the_thread_from_the_projectors_views(
    ledger_settings: CommonSettings,
) -> None:
    """With the projector caught up, a fresh saver restores the thread from Redis without
    reading Kafka, and the projector's view equals the fold of the run's events."""
    settings = saver_settings(ledger_settings)
    config = thread_config("viewed")
    async with AgentLedgerSaver.from_settings(settings) as writer:
        done = await chat_graph(writer).ainvoke(chat_input(20), config)
    assert ledger_settings.redis_url is not None
    projector = projector_settings(
        ledger_settings, projector_group=f"{ledger_settings.key_prefix}-projector"
    )
    async with (
        ProjectorProcess(projector) as process,
        RedisViewStore.from_url(
            ledger_settings.redis_url, key_prefix=ledger_settings.key_prefix
        ) as views,
        KafkaEventLog(settings, transactional_id=f"{settings.key_prefix}-reader") as kafka,
        RedisLeaseStore.from_settings(settings) as leases,
    ):
        await process.wait_ready()
        expected = await fold_log(kafka, "lg.viewed")
        stored = await until(lambda: views.load("lg.viewed"), lambda v: v == expected)
        assert stored == expected
        # caught up means past the trailing commit markers too, which the projector's tick
        # passes a moment after the last event is applied
        ends = await kafka.run_end_positions("lg.viewed")
        assert await until(lambda: views.progress(ends), bool)
        log = CountingLog(kafka)
        saver = AgentLedgerSaver(settings, log=log, leases=leases, views=views)
        async with saver:
            state = await chat_graph(saver).aget_state(config)
    assert state.values == done
    assert log.run_reads == 0


async def test_a_cold_machine_restores_the_thread_from_kafka_alone(
    ledger_settings: CommonSettings,
) -> None:
    """Redis wiped (no views, no leases): a fresh saver folds the run from Kafka, restores the
    thread exactly and continues it under a fence above every fence in the log."""
    settings = saver_settings(ledger_settings)
    config = thread_config("cold")
    async with AgentLedgerSaver.from_settings(settings) as first:
        done = await chat_graph(first).ainvoke(chat_input(10), config)
        fence = (await first.threads.view("cold")).fence
    await wipe_redis(ledger_settings)
    async with AgentLedgerSaver.from_settings(settings) as second:
        graph = chat_graph(second)
        state = await graph.aget_state(config)
        more = await graph.ainvoke({"target": 12}, config)
        resumed = await second.threads.view("cold")
    assert state.values == done
    assert len(more["messages"]) == len(done["messages"]) + 2
    assert resumed.fence > fence
