"""KafkaLogReader.read on a real broker: exactly the committed records of each range, cut at
its end even where a fetch reaches further, with aiokafka's records passed on as they are."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from agentledger.events.topics import topic_names
from agentledger.projector.kafka import KafkaLogReader
from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration


async def _write(bootstrap: str, topic: str, partition: int, txns: int, per_txn: int) -> None:
    """``txns`` committed transactions of ``per_txn`` records (values b"v<i>", key b"k"), then
    one aborted one (its records must never be read)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=f"reader-test-{topic}", acks="all"
    )
    await producer.start()
    try:
        n = 0
        for _ in range(txns):
            async with producer.transaction():
                for _ in range(per_txn):
                    await producer.send(topic, b"v%d" % n, key=b"k", partition=partition)
                    n += 1
        await producer.begin_transaction()
        await producer.send(topic, b"aborted", key=b"k", partition=partition)
        await producer.abort_transaction()
    finally:
        await producer.stop()


async def test_each_range_yields_its_committed_records_and_nothing_past_its_end(
    ledger_settings: CommonSettings,
) -> None:
    """Three transactions of five records on one partition (offsets 0-4, 6-10, 12-16, markers
    between) and an aborted one: the whole range gives the 15 committed records in order; a
    range that ends inside the second transaction stops there although the broker's fetch
    holds more; every record says its topic, partition, offset, key and value."""
    assert ledger_settings.kafka_bootstrap is not None
    topic = topic_names(ledger_settings).steps
    await _write(ledger_settings.kafka_bootstrap, topic, 0, txns=3, per_txn=5)
    async with KafkaLogReader(ledger_settings.kafka_bootstrap) as reader:
        end = (await reader.end_offsets([(topic, 0)]))[(topic, 0)]
        whole = [r async for chunk in reader.read({(topic, 0): (0, end)}, 4) for r in chunk]
        part = [r async for chunk in reader.read({(topic, 0): (3, 9)}, 100) for r in chunk]
    assert [r.value for r in whole] == [b"v%d" % i for i in range(15)]
    assert [r.offset for r in whole] == [*range(5), *range(6, 11), *range(12, 17)]
    assert {(r.topic, r.partition, r.key) for r in whole} == {(topic, 0, b"k")}
    assert [r.offset for r in part] == [3, 4, 6, 7, 8]
    assert [r.value for r in part] == [b"v3", b"v4", b"v5", b"v6", b"v7"]
