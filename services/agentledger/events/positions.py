"""A place in the log: topic, partition and the offset of the next record."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Position:
    """A topic-partition and the offset of the next record (Kafka's "end offset" convention)."""

    topic: str
    partition: int
    offset: int
