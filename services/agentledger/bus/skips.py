"""Records an operator skipped (RecordSkipped): which undecodable records a run's read ignores."""

from __future__ import annotations

from collections.abc import Iterable

from agentledger.errors import DecodeError
from agentledger.events.models import RecordSkipped


def unskipped(
    run_id: str, bad: Iterable[DecodeError], skips: Iterable[RecordSkipped]
) -> list[DecodeError]:
    """The undecodable records of ``run_id`` that no RecordSkipped of the run names."""
    skipped = {
        (s.source_topic, s.source_partition, s.source_offset) for s in skips if s.run_id == run_id
    }
    return [e for e in bad if (e.topic, e.partition, e.offset) not in skipped]
