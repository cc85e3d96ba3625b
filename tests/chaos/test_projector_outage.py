"""Chaos: Redis or the broker goes away under a live projector for longer than the budget.

The projector (``agentledger projector``, a child process) waits the outage out for the budget,
counted from the first failure, then exits 2 with one line naming the dependency and the wait;
the batch it could not apply is not lost: once the dependency is back, a new projector folds
every event.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest

from agentledger.bus.kafka import KafkaEventLog
from agentledger.events import RunEvent, topic_names
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.rebuild import compare, replay_into_new_namespace, wait_for_progress
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.testing import (
    ProjectorProcess,
    expected_view,
    isolated_projector,
    sample_run,
    until,
)
from agentledger.views.model import RunView
from agentledger.views.redis_store import RedisViewStore
from tests.conftest import StackUnderTest

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

BUDGET_S = 2


async def publish(settings: ProjectorSettings, runs: dict[str, list[RunEvent]]) -> None:
    """Publish every run in one transaction each."""
    async with KafkaEventLog(settings, transactional_id=f"out-{uuid.uuid4().hex[:6]}") as log:
        await asyncio.gather(*(log.publish(events) for events in runs.values()))


async def wrong_views(store: RedisViewStore, runs: dict[str, list[RunEvent]]) -> list[str]:
    """Runs whose live view is not (yet) the fold of their events."""
    namespace = await store.live_namespace()
    if namespace is None:
        return sorted(runs)
    stored = await store.load_runs(namespace, sorted(runs))
    found: dict[str, RunView] = {r: s.view for r, s in stored.items()}
    return [r for r in sorted(runs) if found.get(r) != expected_view(runs[r])]


@dataclass
class Projected:
    """A live projector ("gives-up") that has folded ``before``, and a reader of its views."""

    settings: ProjectorSettings
    store: RedisViewStore
    first: ProjectorProcess
    before: dict[str, list[RunEvent]]


def sample_runs(prefix: str, count: int = 20) -> dict[str, list[RunEvent]]:
    """``count`` two-step sample runs with fresh ids starting with ``prefix``."""
    tag = uuid.uuid4().hex[:6]
    return {f"{prefix}{tag}{i}": sample_run(f"{prefix}{tag}{i}", steps=2) for i in range(count)}


@asynccontextmanager
async def projected(stack: StackUnderTest) -> AsyncIterator[Projected]:
    """An isolated projector child with the outage budget, its first runs folded; the child is
    stopped on exit, and its log directory removed unless a check failed."""
    async with isolated_projector(
        stack.kafka_bootstrap, stack.redis_url, outage_budget_s=BUDGET_S
    ) as settings:
        assert settings.redis_url is not None
        async with RedisViewStore.from_url(  # this reader rides the outage out
            settings.redis_url,
            key_prefix=settings.key_prefix,
            retention_ms=settings.retention,
            outage_budget_s=30,
        ) as store:
            first = ProjectorProcess(settings, name="gives-up")
            before = sample_runs("b")
            try:
                await first.start()
                await first.wait_ready()
                await publish(settings, before)
                assert await until(lambda: wrong_views(store, before), lambda w: not w, 60) == []
                yield Projected(settings, store, first, before)
            finally:
                await first.stop()
    shutil.rmtree(first.log_path.parent, ignore_errors=True)  # kept above if a check failed


def assert_gave_up_in_one_line(log: str, dependency: str) -> None:
    """The child's output ends with the one error line naming ``dependency`` and the budget."""
    lines = log.strip().splitlines()
    assert "Traceback" not in log, log[-3000:]
    assert lines[-1].startswith(f"agentledger: error: {dependency} at "), lines[-1]
    assert "is unreachable: gave up after waiting" in lines[-1], lines[-1]
    assert f"(AGENTLEDGER_OUTAGE_BUDGET_S={BUDGET_S})" in lines[-1], lines[-1]


@asynccontextmanager
async def caught_up(p: Projected, everything: dict[str, list[RunEvent]]) -> AsyncIterator[None]:
    """A new projector that has folded ``everything`` into the live views, running until exit."""
    async with ProjectorProcess(p.settings, name="catches-up") as second:
        await second.wait_ready()
        wrong = await until(lambda: wrong_views(p.store, everything), lambda w: not w, 90)
        assert wrong == []
        yield


async def test_redis_gone_past_the_budget_stops_the_projector_in_one_line(
    stack: StackUnderTest,
) -> None:
    """Redis SIGKILLed for longer than the budget makes the projector say it is not healthy,
    then exit 2 with one line naming Redis and the wait (no traceback); after Redis is back a
    new projector folds every event, those published during the outage included."""
    local = stack.require_local_redis()
    during = sample_runs("d")
    async with projected(stack) as p:
        try:
            assert await local.kill_redis()
            status, health = await p.first.health()
            await publish(p.settings, during)
            code = await p.first.wait(60)
        finally:
            await local.up(["redis"])
        await p.first.stop()
        log = p.first.log_path.read_text(errors="replace")
        assert status == 503, health
        assert any("Redis" in problem or "redis" in problem for problem in health["problems"])
        assert code == 2, "\n".join(log.strip().splitlines()[-30:])
        assert_gave_up_in_one_line(log, "Redis")
        async with caught_up(p, p.before | during):
            pass


async def test_broker_gone_past_the_budget_stops_the_projector_in_one_line(
    stack: StackUnderTest,
) -> None:
    """The broker SIGKILLed for longer than the budget makes the projector exit 2 with one line
    naming Kafka and the wait (no traceback); after the broker is back a new projector folds
    every event, those published just before the kill and after the restart included, and the
    live views equal a rebuild from the log."""
    local = stack.require_local()
    racing, after = sample_runs("r"), sample_runs("a")
    async with projected(stack) as p:
        settings, store = p.settings, p.store
        assert settings.kafka_bootstrap is not None
        await publish(settings, racing)  # delivered, or not, when the broker dies
        try:
            assert await local.kill_kafka()
            code = await p.first.wait(120)
        finally:
            await local.start_kafka()
        await p.first.stop()
        log = p.first.log_path.read_text(errors="replace")
        assert code == 2, "\n".join(log.strip().splitlines()[-30:])
        assert_gave_up_in_one_line(log, "Kafka")
        await publish(settings, after)
        everything = p.before | racing | after
        async with caught_up(p, everything):
            live = await store.live_namespace()
            assert live is not None
            async with KafkaLogReader(settings.kafka_bootstrap) as reader:
                replay = await replay_into_new_namespace(
                    store,
                    reader,
                    topic_names(settings).run_topics,
                    partitions=settings.run_partitions,
                )
            assert await wait_for_progress(store, live, replay.ends, 60)
            result = compare(await store.snapshot(live), await store.snapshot(replay.namespace))
            await store.drop_namespace(replay.namespace)
        assert result.differences == []
        assert result.moved_on == []
        assert result.keys_compared > 3 * len(everything)
