"""The event bus: the EventLog port, Kafka's partitioning, and the in-memory log.

The Kafka adapters live in :mod:`agentledger.bus.kafka`, :mod:`agentledger.bus.publisher` and
:mod:`agentledger.bus.consumer`; import them from there.
"""

from __future__ import annotations

from agentledger.bus.memory import MemoryEventLog, StoredRecord
from agentledger.bus.partitioning import key_for, partition_for, run_key
from agentledger.bus.port import EventLog, FenceGuard, Position

__all__ = [
    "EventLog",
    "FenceGuard",
    "MemoryEventLog",
    "Position",
    "StoredRecord",
    "key_for",
    "partition_for",
    "run_key",
]
