"""The event log asks the run topics and their offsets over its producer's own client, on a
real broker: the same offsets a read_committed consumer is told (a transaction left open holds
the end back), and no second client is connected for them."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.offsets import EARLIEST, LATEST, list_offsets
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.run_topics import check_run_topics
from agentledger.events.topics import topic_names
from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration


async def _consumer_offsets(
    bootstrap: str, tps: list[TopicPartition]
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """What a read_committed consumer (the reader's, before) says of ``tps``: ends, beginnings."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", group_id=None
    )
    await consumer.start()
    try:
        return await consumer.end_offsets(tps), await consumer.beginning_offsets(tps)
    finally:
        await consumer.stop()


async def test_offsets_over_the_producer_equal_a_read_committed_consumers(
    ledger_settings: CommonSettings,
) -> None:
    """Two committed transactions and one left open on a partition: over a started producer's
    client (checked as the log checks it) the end is where the open transaction begins, as a
    read_committed consumer says, and the beginnings are the same too."""
    bootstrap = ledger_settings.kafka_bootstrap
    assert bootstrap is not None
    run_topics = topic_names(ledger_settings).run_topics
    writer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="offsets-writer")
    asker = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="offsets-asker")
    await writer.start()
    await asker.start()
    try:
        for n in range(2):
            async with writer.transaction():
                await writer.send(run_topics[0], b"v%d" % n, key=b"k", partition=1)
        await writer.begin_transaction()
        await writer.send(run_topics[0], b"open", key=b"k", partition=1)
        await writer.flush()
        counts, missing = await check_run_topics(asker.client, run_topics)
        assert missing == []
        assert set(counts) == set(run_topics)
        tps = [TopicPartition(t, p) for t in run_topics for p in range(counts[t])]
        ends = await list_offsets(asker.client, tps, LATEST, 10.0)
        starts = await list_offsets(asker.client, tps, EARLIEST, 10.0)
        assert (ends, starts) == await _consumer_offsets(bootstrap, tps)
        assert ends[TopicPartition(run_topics[0], 1)] == 4  # two records, two markers
        await writer.abort_transaction()
    finally:
        await writer.stop()
        await asker.stop()


async def test_a_started_log_asks_end_offsets_without_a_consumer_of_its_own(
    ledger_settings: CommonSettings,
) -> None:
    """A started log's end offsets of a run come over its producer's client: the reader's
    offsets consumer is never connected, and the offsets are the consumer's."""
    bootstrap = ledger_settings.kafka_bootstrap
    assert bootstrap is not None
    async with KafkaEventLog(ledger_settings, transactional_id="offsets-log") as log:
        positions = await log.run_end_positions("run-offsets")
        assert log._reader._offsets_client is None
        partitions = await log._run_partitions()
    partition = partition_for(run_key("run-offsets"), partitions)
    tps = [TopicPartition(p.topic, p.partition) for p in positions]
    assert {tp.partition for tp in tps} == {partition}
    ends, _ = await _consumer_offsets(bootstrap, tps)
    assert [p.offset for p in positions] == [ends[tp] for tp in tps]
