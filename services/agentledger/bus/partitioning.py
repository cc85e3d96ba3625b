"""Which partition a record lands on: Kafka's default murmur2 partitioner for keyed records.

Every run topic has the same partition count and every run event is keyed by its ``run_id``, so a
run's events sit on the same partition number in each run topic (co-partitioning). The in-memory
log uses this exact function, so tests see the partition numbers the real broker would.
"""

from __future__ import annotations

import random

from agentledger.events.keying import murmur2, partition_for, run_key
from agentledger.events.models import (
    Alert,
    Event,
    RecordSkipped,
    ResumeRequested,
    RunEvent,
    RunRequested,
)

__all__ = ["key_for", "murmur2", "partition_for", "producer_partition", "run_key"]


def key_for(event: Event) -> bytes | None:
    """The record key of an event: the run id for run events and requests, the alert id for
    alerts (so updates of one alert stay ordered), none for dead letters."""
    if isinstance(event, RunEvent | RunRequested | ResumeRequested | RecordSkipped):
        return run_key(event.run_id)
    if isinstance(event, Alert):
        return event.alert_id.encode()
    return None


def producer_partition(key: bytes | None, every: list[int], available: list[int]) -> int:
    """The producer's partitioner (aiokafka's ``partitioner=``): its default's choice, a keyed
    record's partition from :func:`partition_for` (remembered per key), so a record and the
    readers looking for its run agree by construction; an unkeyed one anywhere available."""
    if key is None:
        return random.choice(available or every)
    return every[partition_for(key, len(every))]
