"""Counters the projector exposes on its health endpoint (and the bench reads)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from agentledger.views.store import TopicPartition

_RATE_WINDOW_S = 10.0


@dataclass
class Metrics:
    """Totals since start, a recent applied-events rate, and per-partition lag."""

    records: int = 0
    applied: int = 0
    duplicates: int = 0
    parked: int = 0
    stale: int = 0
    conflicts: int = 0
    dead_lettered: int = 0
    alerts: int = 0
    write_conflicts: int = 0
    batches: int = 0
    catch_ups: int = 0
    retries: int = 0
    lag: dict[TopicPartition, int] = field(default_factory=dict)
    assigned: set[TopicPartition] = field(default_factory=set)
    namespace: str | None = None
    _samples: deque[tuple[float, int]] = field(default_factory=deque)

    def count_applied(self, n: int) -> None:
        """Add ``n`` applied events and sample the rate."""
        self.applied += n
        now = time.monotonic()
        self._samples.append((now, self.applied))
        while self._samples and now - self._samples[0][0] > _RATE_WINDOW_S:
            self._samples.popleft()

    def applied_per_second(self) -> float:
        """Events applied per second over the last few seconds."""
        if not self._samples:
            return 0.0
        now = time.monotonic()
        first_t, first_n = self._samples[0]
        span = max(now - first_t, 1e-3)
        return (self.applied - first_n) / span if len(self._samples) > 1 else 0.0

    def as_dict(self) -> dict[str, object]:
        """JSON-ready view of every metric."""
        return {
            "namespace": self.namespace,
            "records_read": self.records,
            "events_applied": self.applied,
            "events_applied_per_second": round(self.applied_per_second(), 1),
            "duplicates_skipped": self.duplicates,
            "events_parked": self.parked,
            "stale_rejected": self.stale,
            "fence_conflicts": self.conflicts,
            "dead_lettered": self.dead_lettered,
            "alerts_sent": self.alerts,
            "write_conflicts": self.write_conflicts,
            "batches": self.batches,
            "catch_ups": self.catch_ups,
            "retries": self.retries,
            "assigned": sorted(f"{t}:{p}" for t, p in self.assigned),
            "lag": {f"{t}:{p}": n for (t, p), n in sorted(self.lag.items())},
        }
