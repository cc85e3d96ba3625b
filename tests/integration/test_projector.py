"""One projector process on the real stack: delivery order, duplicates, fences, poison, gaps.

Every test writes its own runs to the module's topics and asserts on what Redis holds (and on
the alerts / dead-letter topics), never on logs.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaProducer

from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.events import Alert, DeadLettered, EventCodec, RunResumed, StepStarted
from agentledger.events.models import Event, RunRequested
from agentledger.events.topics import topic_names
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.testing import (
    ProjectorProcess,
    expected_view,
    isolated_projector,
    read_events,
    sample_run,
    until,
)
from agentledger.views.model import RunView
from agentledger.views.redis_store import RedisViewStore
from tests.conftest import StackUnderTest

pytestmark = pytest.mark.integration
CODEC = EventCodec()


class Env:
    """The module's settings, a running projector, a transactional log and the view store."""

    def __init__(
        self,
        settings: ProjectorSettings,
        log: KafkaEventLog,
        store: RedisViewStore,
        proc: ProjectorProcess,
    ) -> None:
        self.proc = proc
        self.settings = settings
        self.log = log
        self.store = store
        self.topics = topic_names(settings)

    @property
    def bootstrap(self) -> str:
        assert self.settings.kafka_bootstrap is not None
        return self.settings.kafka_bootstrap

    async def view(self, run_id: str) -> RunView | None:
        return await self.store.load(run_id)

    async def until_view(self, run_id: str, want: RunView, timeout_s: float = 30.0) -> RunView:
        """Wait until the run's view equals ``want``; return the last view seen."""
        return await until(lambda: self.view(run_id), lambda v: v == want, timeout_s)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(stack: StackUnderTest) -> AsyncIterator[Env]:
    """Topics of this module, one projector instance on them (gap alert after 500 ms)."""
    async with isolated_projector(
        stack.kafka_bootstrap, stack.redis_url, projector_gap_alert_ms=500
    ) as settings:
        assert settings.redis_url is not None
        async with (
            ProjectorProcess(settings) as proc,
            KafkaEventLog(settings, transactional_id=f"{settings.key_prefix}-tx") as log,
            RedisViewStore.from_url(settings.redis_url, key_prefix=settings.key_prefix) as store,
        ):
            await proc.wait_ready()
            yield Env(settings, log, store, proc)


def new_run() -> str:
    return f"run-{uuid.uuid4().hex[:8]}"


async def test_duplicated_and_reordered_delivery_folds_to_the_in_order_view(env: Env) -> None:
    """Later seqs first, effects before steps, and every event twice: the in-order view results."""
    run = new_run()
    events = sample_run(run, steps=3)
    effects = [e for e in events if type(e).topic_role == "effects"]
    others = [e for e in events if type(e).topic_role != "effects"]
    await env.log.publish(effects)
    await env.log.publish(others[4:])
    await env.log.publish(others[:4])
    await env.log.publish(events)
    view = await env.until_view(run, expected_view(events))
    assert view == expected_view(events)
    assert view.budget.tokens == 3 * 7  # each activity's cost counted once
    namespace = await env.store.live_namespace()
    assert namespace is not None
    assert (await env.store.load_runs(namespace, [run]))[run].parked == []


async def test_stale_fence_writer_is_rejected_and_alerted(env: Env) -> None:
    """A zombie (fence 1) writing after a takeover (fence 2) changes nothing and is alerted."""
    run = new_run()
    events = sample_run(run, steps=1, finish=False)
    n = len(events)
    takeover = RunResumed(run_id=run, seq=n + 1, fence=2, worker_id="w2", previous_fence=1)
    zombie = StepStarted(
        run_id=run, seq=n + 2, fence=1, worker_id="w1", step=1, step_name="s1", attempt=1
    )
    await env.log.publish([*events, takeover])
    want = expected_view([*events, takeover])
    await env.until_view(run, want)
    await env.log.publish([zombie])

    def stale_alert(found: list[Event]) -> bool:
        return any(isinstance(a, Alert) and a.run_id == run for a in found)

    alerts = await read_events(env.bootstrap, env.topics.alerts, want=stale_alert)
    (alert,) = [a for a in alerts if isinstance(a, Alert) and a.run_id == run]
    assert alert.code == "fence.stale"
    assert alert.worker_id == "w1"
    assert "stale fence 1" in alert.summary
    assert "fence 2 (worker w2)" in alert.summary
    assert await env.view(run) == want


async def test_poison_records_are_dead_lettered_and_the_projector_goes_on(env: Env) -> None:
    """Garbage, an unknown schema and a non-run event are dead-lettered with their origin."""
    run = new_run()
    part = partition_for(run_key(run), env.settings.run_partitions)
    garbage = b"not avro at all"
    unknown = b"\xc3\x01" + b"\xde\xad\xbe\xef" * 2 + b"\x00"
    foreign = CODEC.encode(RunRequested(run_id=run, agent="a"))
    producer = AIOKafkaProducer(bootstrap_servers=env.bootstrap, acks="all")
    await producer.start()
    try:
        sent = []
        for value in (garbage, unknown, foreign):
            meta = await producer.send_and_wait(
                env.topics.steps, value=value, key=run_key(run), partition=part
            )
            sent.append((meta.topic, meta.partition, meta.offset, value))
    finally:
        await producer.stop()
    events = sample_run(run, steps=1)
    await env.log.publish(events)
    await env.until_view(run, expected_view(events))

    def mine(found: list[Event]) -> list[DeadLettered]:
        return [d for d in found if isinstance(d, DeadLettered) and d.key == run_key(run)]

    letters = mine(
        await read_events(env.bootstrap, env.topics.deadletter, want=lambda f: len(mine(f)) >= 3)
    )
    got = sorted((d.source_topic, d.source_partition, d.source_offset, d.value) for d in letters)
    assert got == sorted(sent)
    reasons = {d.value: d.reason for d in letters}
    assert "not Avro" in reasons[garbage]
    assert "unknown schema fingerprint" in reasons[unknown]
    assert "not a run event" in reasons[foreign]
    assert await env.view(run) == expected_view(events)
    assert (await env.proc.metrics())["dead_lettered"] >= 3


async def test_aborted_transactions_never_reach_the_view(env: Env) -> None:
    """The projector reads committed records only (faust's consumer is set to read_committed)."""
    run = new_run()
    events = sample_run(run, steps=2)
    aborted = [
        events[0].model_copy(update={"event_id": uuid.uuid4().hex, "agent": "aborted"}),
        events[1].model_copy(update={"event_id": uuid.uuid4().hex}),
        events[2].model_copy(update={"event_id": uuid.uuid4().hex, "tokens": 1000}),
    ]
    producer = AIOKafkaProducer(
        bootstrap_servers=env.bootstrap, transactional_id=f"abort-{run}", enable_idempotence=True
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        for e in aborted:
            await producer.send(env.topics.for_event(e), value=CODEC.encode(e), key=run_key(run))
        await producer.abort_transaction()
    finally:
        await producer.stop()
    await env.log.publish(events)
    view = await env.until_view(run, expected_view(events))
    assert view == expected_view(events)
    assert view.agent == "bench"
    assert view.budget.tokens == 2 * 7


async def test_a_gap_that_stays_open_is_parked_and_alerted(env: Env) -> None:
    """Events after a missing seq wait parked in Redis, and projector.gap is raised."""
    run = new_run()
    events = sample_run(run, steps=1)
    await env.log.publish([events[0], *events[2:]])

    def gap_alert(found: list[Event]) -> bool:
        return any(isinstance(a, Alert) and a.run_id == run for a in found)

    alerts = await read_events(env.bootstrap, env.topics.alerts, want=gap_alert)
    (alert,) = [a for a in alerts if isinstance(a, Alert) and a.run_id == run]
    assert alert.code == "projector.gap"
    namespace = await env.store.live_namespace()
    assert namespace is not None
    stored = (await env.store.load_runs(namespace, [run]))[run]
    assert stored.view.applied_seq == 1
    assert sorted(e.seq for e in stored.parked) == list(range(3, len(events) + 1))
    await env.log.publish([events[1]])
    assert await env.until_view(run, expected_view(events)) == expected_view(events)


async def test_resume_barrier_completes_at_the_runs_end_positions(env: Env) -> None:
    """progress(run_end_positions) turns true, after which the view holds every committed event."""
    run = new_run()
    events = sample_run(run, steps=2)
    await env.log.publish(events[:5])
    await env.log.publish(events[5:])
    positions = await env.log.run_end_positions(run)
    done = await until(lambda: env.store.progress(positions), bool)
    assert done
    assert await env.view(run) == expected_view(events)
