"""Which partition a record lands on: Kafka's default murmur2 partitioner for keyed records.

Every run topic has the same partition count and every run event is keyed by its ``run_id``, so a
run's events sit on the same partition number in each run topic (co-partitioning). The in-memory
log uses this exact function, so tests see the partition numbers the real broker would.
"""

from __future__ import annotations

from agentledger.events.models import (
    Alert,
    Event,
    RecordSkipped,
    ResumeRequested,
    RunEvent,
    RunRequested,
)

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Java's ``org.apache.kafka.common.utils.Utils.murmur2`` as an unsigned 32-bit integer."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    full = length - length % 4
    for i in range(0, full, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length % 4
    if rest >= 3:
        h ^= data[full + 2] << 16
    if rest >= 2:
        h ^= data[full + 1] << 8
    if rest >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record (``toPositive % n``)."""
    if partitions < 1:
        msg = f"a topic has at least one partition, got {partitions}"
        raise ValueError(msg)
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def run_key(run_id: str) -> bytes:
    """The record key of every event of a run: its id in UTF-8."""
    return run_id.encode()


def key_for(event: Event) -> bytes | None:
    """The record key of an event: the run id for run events and requests, the alert id for
    alerts (so updates of one alert stay ordered), none for dead letters."""
    if isinstance(event, RunEvent | RunRequested | ResumeRequested | RecordSkipped):
        return run_key(event.run_id)
    if isinstance(event, Alert):
        return event.alert_id.encode()
    return None
