"""Where a run's events land: Kafka's default murmur2 partitioner applied to the run id key.

Shared by the bus (which partition a record goes to) and the views (a Redis Cluster namespace
keeps everything of partition p in one slot), so it lives with the events.
"""

from __future__ import annotations

from functools import lru_cache

#: Keys whose partition is remembered: a reconciler pass asks each run's three times (its end
#: offsets, then the producer for each of its two records), a murmur2 in Python costs 1.5 µs.
_REMEMBERED = 1 << 14

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


@lru_cache(maxsize=_REMEMBERED)
def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a keyed record (``toPositive % n``);
    remembered for the last keys asked (a pure function of both)."""
    if partitions < 1:
        msg = f"a topic has at least one partition, got {partitions}"
        raise ValueError(msg)
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def run_key(run_id: str) -> bytes:
    """The record key of every event of a run: its id in UTF-8."""
    return run_id.encode()
