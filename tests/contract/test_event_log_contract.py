"""The event-log contract: every EventLog implementation (memory, Kafka) passes these tests."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from agentledger.bus.partitioning import partition_for, run_key
from agentledger.errors import StaleFenceError
from agentledger.events import (
    AcceptanceEvaluated,
    EffectIntended,
    RunRequested,
    StepCheckpointed,
    StepStarted,
)
from agentledger.events.models import RunEvent
from agentledger.leasing import MemoryLeaseStore
from agentledger.settings import CommonSettings
from tests.contract.event_logs import LogEnv, log_env


@pytest.fixture(params=["memory", pytest.param("kafka", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> CommonSettings | None:
    """None for the in-memory log, else this test's settings on the real broker."""
    if request.param == "memory":
        return None
    settings: CommonSettings = request.getfixturevalue("ledger_settings")
    return settings


@pytest.fixture
async def env(backend: CommonSettings | None) -> AsyncIterator[LogEnv]:
    """Builds logs of one implementation on fresh topics; closes them after the test."""
    async with log_env(backend) as built:
        yield built


def run_id() -> str:
    """A run id unique to this test."""
    return f"run-{uuid.uuid4().hex[:12]}"


def step_events(run: str, *, fence: int = 1, first_seq: int = 1) -> list[RunEvent]:
    """One step's boundary writes: an intent, the acceptance and the checkpoint."""
    env = {"run_id": run, "fence": fence, "worker_id": "w-test"}
    return [
        StepStarted(**env, seq=first_seq, step=0, step_name="fetch", attempt=1),
        EffectIntended(
            **env,
            seq=first_seq + 1,
            step=0,
            ordinal=0,
            effect="refund",
            provider="sandbox",
            kind="payments",
            idempotency_key=f"{run}:0:refund:0",
            identity_hash="i" * 8,
            payload_hash="p" * 8,
        ),
        AcceptanceEvaluated(**env, seq=first_seq + 2, step=0, attempt=1, check="paid", passed=True),
        StepCheckpointed(**env, seq=first_seq + 3, step=0, step_name="fetch", attempt=1),
    ]


async def test_published_events_are_read_back_in_seq_order(env: LogEnv) -> None:
    """Events of one run published across the three run topics come back, sorted by seq."""
    log = await env.make()
    run = run_id()
    events = step_events(run)
    await log.publish(events)
    assert await log.read_run(run) == events


async def test_read_run_keeps_only_the_runs_own_events(env: LogEnv) -> None:
    """Runs sharing a partition do not see each other's events."""
    log = await env.make()
    runs = [run_id() for _ in range(12)]  # more runs than partitions: some share
    for run in runs:
        await log.publish(step_events(run))
    for run in runs:
        assert {e.run_id for e in await log.read_run(run)} == {run}
        assert len(await log.read_run(run)) == 4


async def test_unknown_run_reads_empty(env: LogEnv) -> None:
    """A run that never wrote has no events (not an error)."""
    log = await env.make()
    assert await log.read_run(run_id()) == []


async def test_read_run_since_offsets_returns_only_the_later_events(env: LogEnv) -> None:
    """Reading from the end positions taken after the first step gives the second step only, and
    a partition ``since`` does not name is read from its beginning."""
    log = await env.make()
    run = run_id()
    first, second = step_events(run), step_events(run, first_seq=5)
    await log.publish(first)
    ends = {(p.topic, p.partition): p.offset for p in await log.run_end_positions(run)}
    await log.publish(second)
    assert await log.read_run(run, since=ends) == second
    steps_only = {k: v for k, v in ends.items() if k[0] == env.topics.steps}
    tail = await log.read_run(run, since=steps_only)
    assert [e.seq for e in tail] == [2, 3, 5, 6, 7, 8]


async def test_end_positions_name_the_runs_partition_in_every_run_topic(env: LogEnv) -> None:
    """End positions cover each run topic at the run id's murmur2 partition, past its events."""
    log = await env.make()
    run = run_id()
    before = await log.run_end_positions(run)
    await log.publish(step_events(run))
    after = await log.run_end_positions(run)
    topics = env.topics
    assert [p.topic for p in after] == list(topics.run_topics)
    assert {p.partition for p in after} == {partition_for(run_key(run), env.partitions)}
    grown = {a.topic: a.offset - b.offset for a, b in zip(after, before, strict=True)}
    # steps got StepStarted + StepCheckpointed, effects one intent, acceptance one evaluation;
    # Kafka may add one transaction marker per partition after the records.
    assert grown[topics.steps] >= 2
    assert grown[topics.effects] >= 1
    assert grown[topics.acceptance] >= 1


async def test_requests_are_published_too(env: LogEnv) -> None:
    """Non-run events (a run request) go through publish without touching the run topics."""
    log = await env.make()
    run = run_id()
    await log.publish([RunRequested(run_id=run, agent="refund")])
    assert await log.read_run(run) == []


async def test_fence_guard_rejects_stale_writer_and_keeps_live_ones(env: LogEnv) -> None:
    """A publish whose fence is stale fails with StaleFenceError and is not written; a concurrent
    publish of a live run in the same commit is written."""
    leases = MemoryLeaseStore()
    log = await env.make(guard=leases)
    live, zombie = run_id(), run_id()
    live_lease = await leases.acquire(live, "w-test", 60_000)
    old = await leases.acquire(zombie, "w-test", 60_000)
    new = await leases.acquire(zombie, "w-test", 60_000)  # same owner re-acquires: fence bumps
    assert new.fence == old.fence + 1
    results = await asyncio.gather(
        log.publish(step_events(live, fence=live_lease.fence)),
        log.publish(step_events(zombie, fence=old.fence)),
        return_exceptions=True,
    )
    assert results[0] is None
    assert isinstance(results[1], StaleFenceError)
    assert results[1].run_id == zombie
    assert len(await log.read_run(live)) == 4
    assert await log.read_run(zombie) == []


async def test_one_publish_is_all_or_nothing_under_the_guard(env: LogEnv) -> None:
    """A single publish carrying a live and a stale run writes neither."""
    leases = MemoryLeaseStore()
    log = await env.make(guard=leases)
    live, gone = run_id(), run_id()
    lease = await leases.acquire(live, "w-test", 60_000)
    with pytest.raises(StaleFenceError) as err:
        await log.publish([*step_events(live, fence=lease.fence), *step_events(gone, fence=1)])
    assert err.value.run_id == gone
    assert await log.read_run(live) == []
    assert await log.read_run(gone) == []


async def test_concurrent_publishes_of_many_runs_all_land(env: LogEnv) -> None:
    """Fifty concurrent publishers (sharing commits) each find exactly their events."""
    log = await env.make()
    runs = [run_id() for _ in range(50)]
    await asyncio.gather(*(log.publish(step_events(run)) for run in runs))
    for run in runs[::7]:
        assert [e.seq for e in await log.read_run(run)] == [1, 2, 3, 4]


async def test_sequential_publishes_of_one_run_keep_order(env: LogEnv) -> None:
    """Back-to-back publishes of one run (one commit each) read back in order."""
    log = await env.make()
    run = run_id()
    for i in range(5):
        await log.publish(step_events(run, first_seq=1 + 4 * i))
    assert [e.seq for e in await log.read_run(run)] == list(range(1, 21))


async def test_never_written_until_a_run_event_is_committed(env: LogEnv) -> None:
    """A fresh log says it was never written to; once a run's events commit it never says so."""
    log = await env.make()
    assert await log.never_written()
    await log.publish(step_events(run_id()))
    assert not await log.never_written()
