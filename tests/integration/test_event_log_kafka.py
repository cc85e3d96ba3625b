"""What the Kafka event log adds to the contract: group commit, fencing, crash recovery."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agentledger.bus.admin import delete_topics, kafka_admin
from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import FenceGuard, Holder
from agentledger.errors import (
    AgentLedgerError,
    ProducerFencedError,
    PublishError,
    RunLogCorruptError,
    StaleFenceError,
)
from agentledger.events import Alert, EventCodec, RunForked, StepStarted, TopicNames
from agentledger.leasing import RedisLeaseStore
from agentledger.outage import outage_of
from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration


def started(run: str, seq: int = 1, fence: int = 1, worker: str = "w") -> StepStarted:
    """A minimal run event."""
    return StepStarted(
        run_id=run, seq=seq, fence=fence, worker_id=worker, step=0, step_name="s", attempt=1
    )


async def test_concurrent_publishes_share_commits(ledger_settings: CommonSettings) -> None:
    """Many runs publishing at once need fewer commits than publishes, and all land."""
    async with KafkaEventLog(ledger_settings, transactional_id="group") as log:
        events = {f"run-{i}": started(f"run-{i}") for i in range(40)}
        await asyncio.gather(*(log.publish([event]) for event in events.values()))
        assert log.stats.publishes == 40
        assert log.stats.commits < 40
        for run in list(events)[::9]:
            assert await log.read_run(run) == [events[run]]


async def test_restarted_writer_fences_its_predecessor(ledger_settings: CommonSettings) -> None:
    """A second log with the same transactional id fences the first: its publish fails, typed."""
    async with KafkaEventLog(ledger_settings, transactional_id="worker-1") as old:
        await old.publish([started("r", seq=1)])
        async with KafkaEventLog(ledger_settings, transactional_id="worker-1") as new:
            with pytest.raises(ProducerFencedError):
                await old.publish([started("r", seq=2)])
            with pytest.raises(ProducerFencedError):
                await old.publish([started("r", seq=3)])
            await new.publish([started("r", seq=2, fence=2)])
            assert [(e.seq, e.fence) for e in await new.read_run("r")] == [(1, 1), (2, 2)]


async def test_restart_aborts_the_open_transaction_of_a_killed_writer(
    ledger_settings: CommonSettings,
) -> None:
    """A writer that died mid-transaction blocks nothing once its successor starts: the open
    transaction is aborted and its records are never read."""
    topics = TopicNames(ledger_settings.topic_prefix)
    codec = EventCodec()
    dead = AIOKafkaProducer(
        bootstrap_servers=ledger_settings.kafka_bootstrap,
        transactional_id="worker-2",
        enable_idempotence=True,
        transaction_timeout_ms=120_000,  # the broker alone would keep it open for 2 minutes
    )
    await dead.start()
    await dead.begin_transaction()
    await dead.send_and_wait(topics.steps, codec.encode(started("r")), key=run_key("r"))
    # Simulate SIGKILL: drop the connections without ending the transaction.
    dead._sender._sender_task.cancel()
    await dead.client.close()
    # Reads give up after 5 s: only the successor's abort can unblock the partition in time.
    impatient = ledger_settings.model_copy(update={"kafka_publish_timeout_ms": 5_000})
    try:
        async with KafkaEventLog(impatient, transactional_id="worker-2") as successor:
            await successor.publish([started("r", seq=1, fence=2)])
            assert [e.fence for e in await successor.read_run("r")] == [2]
    finally:
        await dead.stop()  # releases the dead producer's objects; it can no longer send anything


async def test_redis_guard_rejects_a_zombie_on_the_real_broker(
    ledger_settings: CommonSettings,
) -> None:
    """With the Redis lease store as guard, a taken-over run's old writer is refused."""
    async with RedisLeaseStore.from_settings(ledger_settings) as leases:
        old = await leases.acquire("r", "w-1", 60_000)
        await leases.release(old)
        new = await leases.acquire("r", "w-2", 60_000)
        async with KafkaEventLog(ledger_settings, transactional_id="guarded", guard=leases) as log:
            with pytest.raises(StaleFenceError):
                await log.publish([started("r", fence=old.fence, worker="w-1")])
            await log.publish([started("r", fence=new.fence, worker="w-2")])
            assert [e.fence for e in await log.read_run("r")] == [new.fence]


async def only_bad_record(settings: CommonSettings, topic: str, value: bytes, run: str) -> str:
    """Send ``value`` keyed by ``run`` to ``topic`` outside the log; read_run must raise naming
    that one record's topic/partition/offset. Returns the reason it gives."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap)
    await producer.start()
    try:
        meta = await producer.send_and_wait(topic, value, key=run_key(run))
    finally:
        await producer.stop()
    async with KafkaEventLog(settings, transactional_id="reader") as log:
        with pytest.raises(RunLogCorruptError) as err:
            await log.read_run(run)
    (bad,) = err.value.errors
    assert (bad.topic, bad.partition, bad.offset) == (topic, meta.partition, meta.offset)
    return bad.reason


async def test_read_run_names_undecodable_records(ledger_settings: CommonSettings) -> None:
    """A poison record keyed by the run makes read_run raise with its topic/partition/offset."""
    topics = TopicNames(ledger_settings.topic_prefix)
    await only_bad_record(ledger_settings, topics.effects, b"junk", "r")


async def test_read_run_names_a_fork_the_fold_cannot_read(ledger_settings: CommonSettings) -> None:
    """A RunForked whose inherited_json is not JSON makes read_run raise as a poison record does,
    naming its topic/partition/offset (the projector dead-letters it)."""
    topics = TopicNames(ledger_settings.topic_prefix)
    fork = RunForked(
        run_id="r-fork", seq=1, fence=1, worker_id="w", parent_run_id="p", from_step=0,
        generation=1, inherited_json="{not json",
    )  # fmt: skip
    value = EventCodec().encode(fork)
    reason = await only_bad_record(ledger_settings, topics.steps, value, "r-fork")
    assert "RunForked of run r-fork at seq 1: inherited_json is not JSON" in reason


async def gone(settings: CommonSettings, topic: str) -> None:
    """Wait until the broker's metadata no longer lists ``topic`` (deletion is asynchronous)."""
    assert settings.kafka_bootstrap is not None
    async with kafka_admin(settings.kafka_bootstrap) as admin:
        for _ in range(100):
            if topic not in await admin.list_topics():
                return
            await asyncio.sleep(0.1)
    pytest.fail(f"topic {topic} was still listed 10 s after its deletion")


async def test_a_failed_commit_fails_every_publish_in_it(ledger_settings: CommonSettings) -> None:
    """When a group's transaction fails, every publish in it gets PublishError, none of its
    events become visible, and the log commits again afterwards."""
    topics = TopicNames(ledger_settings.topic_prefix)
    await delete_topics(ledger_settings, [topics.alerts])  # the broker never auto-creates
    await gone(ledger_settings, topics.alerts)
    impatient = ledger_settings.model_copy(update={"kafka_publish_timeout_ms": 3_000})
    alert = Alert(alert_id="a-1", code="test", severity="info", summary="nowhere to go")
    first, doomed, after = started("r", seq=1), started("r", seq=2), started("r", seq=3)
    async with KafkaEventLog(impatient, transactional_id="failing") as log:
        await log.publish([first])
        results = await asyncio.gather(
            log.publish([doomed]), log.publish([alert]), return_exceptions=True
        )
        assert [type(r) for r in results] == [PublishError, PublishError]
        assert all(isinstance(r, PublishError) and not r.maybe_committed for r in results)
        assert log.stats.failed_commits == 1
        await log.publish([after])
        assert await log.read_run("r") == [first, after]


async def test_a_refused_commit_within_a_budget_fails_at_once_and_is_no_outage(
    ledger_settings: CommonSettings,
) -> None:
    """With an outage budget longer than the test's timeout, a transaction the broker refuses (a
    deleted topic) fails its publishes on the first try naming the topic, is not counted as an
    outage, and the next publish commits on a new producer with the same transactional id."""
    topics = TopicNames(ledger_settings.topic_prefix)
    await delete_topics(ledger_settings, [topics.alerts])
    await gone(ledger_settings, topics.alerts)
    # Waiting this out would outlast the test's timeout: the test fails instead of passing late.
    patient = ledger_settings.model_copy(
        update={"kafka_publish_timeout_ms": 3_000, "outage_budget_s": 3_600.0}
    )
    alert = Alert(alert_id="a-2", code="test", severity="info", summary="nowhere to go")
    assert patient.kafka_bootstrap is not None
    kafka = outage_of("Kafka", patient.kafka_bootstrap)  # what the outage gauge reads
    async with KafkaEventLog(patient, transactional_id="refused") as log:
        with pytest.raises(PublishError, match=f"{topics.alerts}.*do not exist") as err:
            await log.publish([started("r", seq=1), alert])
        assert not err.value.maybe_committed
        assert kafka.down_since is None
        assert (log.stats.failed_commits, log.stats.producer_resets) == (1, 1)
        await log.publish([started("r", seq=2)])
        assert [e.seq for e in await log.read_run("r")] == [2]
        assert (log.stats.failed_commits, log.stats.commits) == (1, 1)
        assert kafka.down_since is None


async def test_concurrent_reads_of_many_runs_each_return_their_own_events(
    ledger_settings: CommonSettings,
) -> None:
    """Forty runs read back at once (more readers than consumers) each get exactly their events,
    and their end positions, asked at once, cover what was committed."""
    async with KafkaEventLog(ledger_settings, transactional_id="many") as log:
        runs = [f"run-{i}" for i in range(40)]
        await asyncio.gather(*(log.publish([started(r, seq=1), started(r, seq=2)]) for r in runs))
        reads = await asyncio.gather(*(log.read_run(r) for r in runs))
        assert [[(e.run_id, e.seq) for e in read] for read in reads] == [
            [(r, 1), (r, 2)] for r in runs
        ]
    async with KafkaEventLog(ledger_settings, transactional_id="reader") as reader:
        positions = await asyncio.gather(*(reader.run_end_positions(r) for r in runs))
        steps_topic = TopicNames(ledger_settings.topic_prefix).steps
        total = sum(
            {
                (p.topic, p.partition): p.offset
                for ps in positions
                for p in ps
                if p.topic == steps_topic
            }.values()
        )
        assert total >= 2 * len(runs)  # every committed event lies below its partition's end


class SlowThenBrokenGuard(FenceGuard):
    """Answers its first check only after the transaction's records were sent, with an error
    (Redis answered: not an outage to wait out), then says every claim is live."""

    def __init__(self) -> None:
        self.checks = 0

    async def stale(self, claims: dict[str, Holder]) -> set[str]:
        """Fail the first check (late), say every claim is live afterwards."""
        self.checks += 1
        if self.checks == 1:
            await asyncio.sleep(0.2)  # the records are in the open transaction by now
            raise AgentLedgerError("the lease script was refused")
        return set()


async def test_a_fence_check_failing_beside_the_transaction_writes_nothing(
    ledger_settings: CommonSettings,
) -> None:
    """The fence check runs beside begin and send: when it fails, the sent records are aborted
    (never visible to read_committed readers) and the next publish commits."""
    guard = SlowThenBrokenGuard()
    async with KafkaEventLog(ledger_settings, transactional_id="late-guard", guard=guard) as log:
        with pytest.raises(PublishError, match="fence check failed"):
            await log.publish([started("late")])
        assert await log.read_run("late") == []
        await log.publish([started("late", seq=1, fence=2)])
        assert [e.fence for e in await log.read_run("late")] == [2]


class SlowFirstGuard(FenceGuard):
    """Answers its first check only after ``delay_s`` (a Redis slow beyond the transaction
    timeout), every later one at once; every claim is live."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.checks = 0

    async def stale(self, claims: dict[str, Holder]) -> set[str]:
        """Say every claim is live, late the first time."""
        self.checks += 1
        if self.checks == 1:
            await asyncio.sleep(self.delay_s)
        return set()


async def test_a_transaction_the_broker_timed_out_is_written_again_on_a_new_producer(
    ledger_settings: CommonSettings,
) -> None:
    """A transaction held open past transaction.timeout.ms (the fence check was slow) is aborted
    by the broker, which bumps the producer's epoch: the log does not take that for a newer
    producer's fence; it writes the batch again on a new producer, once, after a new fence
    check, and keeps writing."""
    settings = ledger_settings.model_copy(
        update={"kafka_transaction_timeout_ms": 1_000, "kafka_publish_timeout_ms": 30_000}
    )
    # the stack's brokers look for timed-out transactions every second
    guard = SlowFirstGuard(delay_s=4.0)
    async with KafkaEventLog(settings, transactional_id="timed-out", guard=guard) as log:
        await log.publish([started("slow")])
        await log.publish([started("slow", seq=2)])
        assert [e.seq for e in await log.read_run("slow")] == [1, 2]
        assert guard.checks == 3  # the late check, the one of the rewrite, the next publish
        assert log.stats.producer_resets == 1


async def _last_offsets_by_key(
    settings: CommonSettings, topic: str, partition: int, keys: set[bytes]
) -> dict[bytes, int]:
    """The offset of the last committed record of each key of ``keys`` in one partition."""
    tp = TopicPartition(topic, partition)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        last: dict[bytes, int] = {}
        while await consumer.position(tp) < end:
            for record in (await consumer.getmany(tp, timeout_ms=1000)).get(tp, []):
                if record.key in keys:
                    last[record.key] = record.offset
        return last
    finally:
        await consumer.stop()


async def test_a_commit_of_many_runs_knows_where_each_partition_ends(
    ledger_settings: CommonSettings,
) -> None:
    """After one group commit of many runs with several events each (one batch a partition),
    the log's committed end of each partition is just past its last record there."""
    async with KafkaEventLog(ledger_settings, transactional_id="batches") as log:
        runs = [f"batched-{i}-{id(log)}" for i in range(30)]
        await asyncio.gather(*(log.publish([started(r, seq) for seq in (1, 2, 3)]) for r in runs))
        assert log.stats.commits < len(runs)
        topic = log.topics.steps
        count = await log._partitions_riding_out()
        by_partition: dict[int, set[bytes]] = {}
        for r in runs:
            by_partition.setdefault(partition_for(run_key(r), count), set()).add(run_key(r))
        for partition, keys in by_partition.items():
            last = await _last_offsets_by_key(ledger_settings, topic, partition, keys)
            assert set(last) == keys
            assert log.committed_end(topic, partition) == max(last.values()) + 1
        for r in runs[::7]:
            assert [e.seq for e in await log.read_run(r)] == [1, 2, 3]
