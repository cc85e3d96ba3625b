"""Offsets asked over a client already connected (the producer's): no consumer of their own.

A ListOffsets request per partition leader, read_committed (the end offset is the last stable
offset, as a read_committed consumer's ``end_offsets`` gives it). A leader that moved or a
partition the client does not know yet refreshes the client's metadata and asks again, until
the deadline; any other error of the broker is raised as it is.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError, KafkaTimeoutError, StaleMetadata, for_code
from aiokafka.protocol.offset import OffsetRequest

#: ListOffsets' timestamps for "the end" and "the beginning" of a partition.
LATEST = -1
EARLIEST = -2
READ_COMMITTED = 1
RETRY_BACKOFF_S = 0.05


async def list_offsets(
    client: Any, tps: Sequence[TopicPartition], timestamp: int, timeout_s: float
) -> dict[TopicPartition, int]:
    """The offset at ``timestamp`` (LATEST, EARLIEST) of each partition, asked over ``client``
    (an ``AIOKafkaClient``); KafkaTimeoutError when it cannot be told within ``timeout_s``."""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                try:
                    return await _ask_leaders(client, tps, timestamp)
                except KafkaError as e:
                    if not e.retriable:
                        raise
                    if e.invalid_metadata:
                        await client.force_metadata_update()
                    await asyncio.sleep(RETRY_BACKOFF_S)
    except TimeoutError as e:
        msg = f"offsets of {len(tps)} partition(s) not told within {timeout_s:.1f} s"
        raise KafkaTimeoutError(msg) from e


async def _ask_leaders(
    client: Any, tps: Sequence[TopicPartition], timestamp: int
) -> dict[TopicPartition, int]:
    """One ListOffsets request to each leader of ``tps``, sent together."""
    by_leader: dict[int, dict[str, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for tp in tps:
        leader = client.cluster.leader_for_partition(tp)
        if leader is None or leader == -1:
            client.add_topic(tp.topic)
            raise StaleMetadata(tp)  # retriable, invalid metadata: refreshed, then asked again
        by_leader[leader][tp.topic].append((tp.partition, timestamp))
    answers = await asyncio.gather(
        *(
            client.send(leader, OffsetRequest(-1, READ_COMMITTED, list(topics.items())))
            for leader, topics in by_leader.items()
        )
    )
    found: dict[TopicPartition, int] = {}
    for answer in answers:
        found.update(offsets_of(answer))
    return found


def offsets_of(answer: Any) -> dict[TopicPartition, int]:
    """The offsets of a ListOffsets response (v1 or later); the first error of a partition is
    raised (``NotLeaderForPartitionError`` and the like are retriable)."""
    found: dict[TopicPartition, int] = {}
    for topic, partitions in answer.topics:
        for partition, error_code, _timestamp, offset, *_ in partitions:
            error = for_code(error_code)
            if error.errno != 0:
                raise error(f"ListOffsets for {topic}[{partition}]")
            found[TopicPartition(topic, partition)] = offset
    return found
