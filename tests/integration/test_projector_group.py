"""Projector instances in one consumer group: co-partitioned assignment, scale-out mid-stream."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Sequence

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

pytestmark = pytest.mark.integration

PARTITIONS = 6
RUNS = 1000


def assignment_problems(settings: ProjectorSettings, assigned: Sequence[list[str]]) -> list[str]:
    """Why the instances' assignments are not one complete, co-partitioned split ([] = fine)."""
    topics = topic_names(settings).run_topics
    every = {f"{t}:{p}" for t in topics for p in range(PARTITIONS)}
    problems = []
    seen: set[str] = set()
    for i, tps in enumerate(assigned):
        mine = set(tps)
        if mine & seen:
            problems.append(f"instance {i} shares {sorted(mine & seen)}")
        seen |= mine
        numbers = [
            {int(tp.rsplit(":", 1)[1]) for tp in mine if tp.startswith(t + ":")} for t in topics
        ]
        if any(n != numbers[0] for n in numbers):
            problems.append(f"instance {i} is not co-partitioned: {numbers}")
        if not mine:
            problems.append(f"instance {i} has nothing")
    if seen != every:
        problems.append(f"unassigned: {sorted(every - seen)}")
    return problems


async def settled_assignment(
    settings: ProjectorSettings, procs: Sequence[ProjectorProcess], timeout_s: float = 90.0
) -> list[str]:
    """Wait until the group's assignment is complete and co-partitioned; return what is wrong."""

    async def current() -> list[str]:
        assigned = [(await p.metrics())["assigned"] for p in procs]
        return assignment_problems(settings, assigned)

    return await until(current, lambda problems: not problems, timeout_s)


async def publish_runs(settings: ProjectorSettings, runs: dict[str, list[RunEvent]]) -> None:
    """Publish every run in 2-3 transactions, runs interleaved, through 3 concurrent writers."""
    rng = random.Random(7)
    pieces: list[list[RunEvent]] = []
    for events in runs.values():
        cut = rng.randint(1, len(events) - 1)
        pieces.append(events[:cut])
        pieces.append(events[cut:])
    # keep each run's pieces in order, interleave across runs
    by_run: dict[str, list[list[RunEvent]]] = {}
    for piece in pieces:
        by_run.setdefault(piece[0].run_id, []).append(piece)
    lanes: list[list[list[RunEvent]]] = [[], [], []]
    for i, run_pieces in enumerate(by_run.values()):
        lanes[i % 3].extend(run_pieces)
    tag = uuid.uuid4().hex[:6]

    async def lane(n: int, work: list[list[RunEvent]]) -> None:
        async with KafkaEventLog(settings, transactional_id=f"group-{tag}-{n}") as log:
            pending: list[asyncio.Task[None]] = []
            for piece in work:
                pending.append(asyncio.ensure_future(log.publish(piece)))
                if len(pending) >= 32:
                    await asyncio.gather(*pending)
                    pending = []
            await asyncio.gather(*pending)

    await asyncio.gather(*(lane(n, w) for n, w in enumerate(lanes)))


async def mismatched(store: RedisViewStore, expected: dict[str, RunView]) -> list[str]:
    namespace = await store.live_namespace()
    if namespace is None:
        return sorted(expected)
    ids = sorted(expected)
    stored: dict[str, RunView] = {}
    for i in range(0, len(ids), 200):
        found = await store.load_runs(namespace, ids[i : i + 200])
        stored.update({r: s.view for r, s in found.items()})
    return [r for r in ids if stored.get(r) != expected[r]]


async def test_group_scales_out_mid_stream_with_co_partitioned_assignment(
    stack: StackUnderTest,
) -> None:
    """Two instances, a third joining mid-stream, 1,000 interleaved runs: every partition
    number of the three run topics sits on one instance, every view is exact, and a replay of
    the topics equals the live views key for key."""
    async with isolated_projector(
        stack.kafka_bootstrap, stack.redis_url, run_partitions=PARTITIONS
    ) as settings:
        runs = {f"g{i:04d}": sample_run(f"g{i:04d}", steps=1) for i in range(RUNS)}
        expected = {r: expected_view(e) for r, e in runs.items()}
        first_half = dict(list(runs.items())[: RUNS // 2])
        second_half = dict(list(runs.items())[RUNS // 2 :])
        assert settings.redis_url is not None
        assert settings.kafka_bootstrap is not None
        async with (
            ProjectorProcess(settings, name="a") as a,
            ProjectorProcess(settings, name="b") as b,
            RedisViewStore.from_url(
                settings.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
        ):
            await asyncio.gather(a.wait_ready(), b.wait_ready())
            assert await settled_assignment(settings, [a, b]) == []
            await publish_runs(settings, first_half)
            async with ProjectorProcess(settings, name="c") as c:
                await c.wait_ready()
                await publish_runs(settings, second_half)
                assert await settled_assignment(settings, [a, b, c]) == []
                wrong = await until(lambda: mismatched(store, expected), lambda w: not w, 120)
                assert wrong == []
                applied = [(await p.metrics())["events_applied"] for p in (a, b, c)]
                assert sum(applied) >= sum(len(e) for e in runs.values())
                assert all(n > 0 for n in applied[:2])
                await assert_replay_equals_live(settings, store)


async def assert_replay_equals_live(settings: ProjectorSettings, store: RedisViewStore) -> None:
    """A replay of all topics into a scratch namespace equals the live one, key for key."""
    assert settings.kafka_bootstrap is not None
    live = await store.live_namespace()
    assert live is not None
    async with KafkaLogReader(settings.kafka_bootstrap) as reader:
        replay = await replay_into_new_namespace(
            store, reader, topic_names(settings).run_topics, partitions=settings.run_partitions
        )
    assert await wait_for_progress(store, live, replay.ends, 60)
    result = compare(await store.snapshot(live), await store.snapshot(replay.namespace))
    assert result.differences == []
    assert result.moved_on == []
    assert result.keys_compared > 3 * RUNS
    await store.drop_namespace(replay.namespace)
