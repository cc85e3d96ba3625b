"""The operator's way out of one undecodable record in a run's log: skip it, as an event.

``agentledger runs skip-record RUN --topic T --partition P --offset O --reason TEXT`` checks that
the record at that position is the run's (its key) and that nobody can decode it, then writes
:class:`RecordSkipped` under the run's key. Readers of the run's log (the SDK's resume, the
reconciler) then leave that record out, so the run can be resumed; the record itself stays in
the log (and in the dead-letter topic, where the projector put it).
"""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import EventPublisher
from agentledger.errors import ConfigurationError, DecodeError
from agentledger.events.codec import EventCodec
from agentledger.events.models import RecordSkipped, RunEvent
from agentledger.events.topics import topic_names
from agentledger.kafkaclient import kafka_options
from agentledger.settings import CommonSettings

_READ_TIMEOUT_S = 15.0


async def read_record(
    bootstrap: str,
    topic: str,
    partition: int,
    offset: int,
    *,
    settings: CommonSettings | None = None,
) -> ConsumerRecord[bytes, bytes] | None:
    """The committed record at exactly ``offset`` (None: no record there)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        client_id="agentledger-skip-record",
        **kafka_options(settings),
    )
    await consumer.start()
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        if offset >= end:
            return None
        consumer.seek(tp, offset)
        deadline = asyncio.get_running_loop().time() + _READ_TIMEOUT_S
        while asyncio.get_running_loop().time() < deadline:
            batch = await consumer.getmany(tp, timeout_ms=200, max_records=1)
            for message in batch.get(tp, []):
                return message if message.offset == offset else None
            if await consumer.position(tp) >= end:
                return None
        return None
    finally:
        await consumer.stop()


async def skip_record(
    settings: CommonSettings,
    publisher: EventPublisher,
    run_id: str,
    *,
    topic: str,
    partition: int,
    offset: int,
    reason: str,
    skipped_by: str,
) -> RecordSkipped:
    """Check that the record is the run's and undecodable, then record the skip."""
    names = topic_names(settings)
    if topic not in names.run_topics:
        msg = f"--topic {topic}: not a run topic (one of {', '.join(names.run_topics)})"
        raise ConfigurationError(msg)
    home = partition_for(run_key(run_id), settings.run_partitions)
    if partition != home:
        msg = f"--partition {partition}: run {run_id}'s records are on partition {home}"
        raise ConfigurationError(msg)
    if settings.kafka_bootstrap is None:
        msg = "kafka_bootstrap must be resolved before skipping a record"
        raise ConfigurationError(msg)
    record = await read_record(
        settings.kafka_bootstrap, topic, partition, offset, settings=settings
    )
    if record is None:
        msg = f"{topic}:{partition}@{offset} holds no committed record"
        raise ConfigurationError(msg)
    if record.key != run_key(run_id):
        msg = f"{topic}:{partition}@{offset} is not a record of run {run_id} (other key)"
        raise ConfigurationError(msg)
    try:
        event = EventCodec().decode(record.value, topic=topic, partition=partition, offset=offset)
    except DecodeError:
        event = None
    if isinstance(event, RunEvent) and event.run_id == run_id:
        msg = (
            f"{topic}:{partition}@{offset} decodes as {type(event).__name__} seq {event.seq} of "
            f"run {run_id}: only an undecodable record can be skipped"
        )
        raise ConfigurationError(msg)
    skip = RecordSkipped(
        run_id=run_id,
        source_topic=topic,
        source_partition=partition,
        source_offset=offset,
        reason=reason,
        skipped_by=skipped_by,
    )
    await publisher.publish([skip])
    return skip
