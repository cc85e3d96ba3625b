"""A transaction's records grouped by the partition they land on, for one aiokafka batch each.

aiokafka's per-record ``send`` is a coroutine, a metadata wait, an accumulator call and a
future per record, and each future's ack is a callback on the loop: with a group commit of a
few hundred records that was most of the producer's CPU. A keyed record's partition is known
before it is sent (:func:`~agentledger.bus.partitioning.producer_partition`, the producer's own
partitioner, is :func:`~agentledger.events.keying.partition_for` of the key), so the event log
appends each partition's records to one batch and sends it with ``send_batch``: the same
records, keys and values, in the same order within each partition, in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from agentledger.events.keying import partition_for

#: A record as the event log sends it: topic, key (None for unkeyed), value.
Record = tuple[str, bytes | None, bytes]
#: Where a record lands: topic and partition.
TopicPartition = tuple[str, int]


def by_partition(
    records: Iterable[Record], partitions: Mapping[str, Sequence[int]]
) -> tuple[dict[TopicPartition, list[tuple[bytes, bytes]]], list[Record]]:
    """The keyed records by the partition the producer's partitioner gives them (their order
    kept within each), and the unkeyed ones (sent one by one: the producer picks their
    partition). ``partitions`` holds every topic's partitions in the order the producer's
    partitioner is given them (``list(await producer.partitions_for(topic))``)."""
    groups: dict[TopicPartition, list[tuple[bytes, bytes]]] = {}
    unkeyed: list[Record] = []
    for topic, key, value in records:
        if key is None:
            unkeyed.append((topic, key, value))
            continue
        every = partitions[topic]
        tp = (topic, every[partition_for(key, len(every))])
        group = groups.get(tp)
        if group is None:
            groups[tp] = [(key, value)]
        else:
            group.append((key, value))
    return groups, unkeyed
