"""Every event type through the real broker: transactional producer, read_committed consumer."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from agentledger.bus.consumer import Consumed, KafkaEventConsumer
from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.partitioning import run_key
from agentledger.bus.publisher import KafkaPublisher
from agentledger.events import EVENT_TYPES, EventCodec, StepStarted, TopicNames
from agentledger.settings import CommonSettings
from tests.unit.event_samples import RUN, samples

pytestmark = pytest.mark.integration


async def read_all(settings: CommonSettings) -> list[Consumed]:
    """Everything committed on every topic of this test, up to the current end offsets."""
    topics = TopicNames(settings.topic_prefix)
    names = [*topics.run_topics, topics.requests, topics.alerts, topics.deadletter]
    async with KafkaEventConsumer(settings, names, until_end=True) as consumer:
        return [record async for record in consumer]


async def test_every_event_type_round_trips_in_one_transaction(
    ledger_settings: CommonSettings,
) -> None:
    """All event types written in one transaction come back equal, each on its own topic."""
    events = samples()
    assert {type(e) for e in events} == set(EVENT_TYPES)
    async with KafkaEventLog(ledger_settings, transactional_id="every-event") as log:
        await log.publish(events)
    consumed = await read_all(ledger_settings)
    assert [c.error for c in consumed if c.error] == []
    assert sorted((c.event for c in consumed), key=lambda e: e.event_id) == sorted(
        events, key=lambda e: e.event_id
    )
    topics = TopicNames(ledger_settings.topic_prefix)
    for c in consumed:
        assert c.event is not None
        assert c.topic == topics.for_event(c.event)


async def test_every_event_type_round_trips_through_the_plain_publisher(
    ledger_settings: CommonSettings,
) -> None:
    """The idempotent non-transactional publisher delivers every event type too."""
    events = samples()
    async with KafkaPublisher(ledger_settings) as publisher:
        await publisher.publish(events)
    consumed = await read_all(ledger_settings)
    assert [c.error for c in consumed if c.error] == []
    assert sorted((c.event for c in consumed), key=lambda e: e.event_id) == sorted(
        events, key=lambda e: e.event_id
    )


async def test_aborted_transaction_is_invisible_to_read_committed(
    ledger_settings: CommonSettings,
) -> None:
    """Records of an aborted transaction are neither consumed nor returned by read_run."""
    codec = EventCodec()
    topics = TopicNames(ledger_settings.topic_prefix)
    ghost = StepStarted(
        run_id=RUN, seq=1, fence=1, worker_id="w", step=0, step_name="ghost", attempt=1
    )
    real = StepStarted(
        run_id=RUN, seq=1, fence=1, worker_id="w", step=0, step_name="real", attempt=1
    )
    producer = AIOKafkaProducer(
        bootstrap_servers=ledger_settings.kafka_bootstrap,
        transactional_id="abort-test",
        enable_idempotence=True,
    )
    await producer.start()
    try:
        await producer.begin_transaction()
        await producer.send_and_wait(topics.steps, codec.encode(ghost), key=run_key(RUN))
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(topics.steps, codec.encode(real), key=run_key(RUN))
    finally:
        await producer.stop()
    consumed = await read_all(ledger_settings)
    assert [c.event for c in consumed] == [real]
    async with KafkaEventLog(ledger_settings, transactional_id="abort-reader") as log:
        assert await log.read_run(RUN) == [real]


async def test_poison_records_are_yielded_with_their_position(
    ledger_settings: CommonSettings,
) -> None:
    """An undecodable record reaches the consumer as a DecodeError naming its place."""
    topics = TopicNames(ledger_settings.topic_prefix)
    producer = AIOKafkaProducer(bootstrap_servers=ledger_settings.kafka_bootstrap)
    await producer.start()
    try:
        meta = await producer.send_and_wait(topics.alerts, b"\xc3\x01garbage", key=b"k")
    finally:
        await producer.stop()
    (record,) = await read_all(ledger_settings)
    assert record.event is None
    assert record.error is not None
    assert (record.error.topic, record.error.partition, record.error.offset) == (
        topics.alerts,
        meta.partition,
        meta.offset,
    )
    assert record.value == b"\xc3\x01garbage"
