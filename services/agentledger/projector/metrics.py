"""Counters the projector keeps; /metrics exports them (Prometheus text, or JSON for the bench)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
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
    held: int = 0  # events held in memory while a gap was likely to fill (DESIGN.md §16)
    rereads: int = 0  # runs re-read from the log after dropping parked events over the cap
    stale: int = 0
    conflicts: int = 0
    dead_lettered: int = 0
    alerts: int = 0
    alerts_by_code: dict[str, int] = field(default_factory=dict)
    write_conflicts: int = 0
    batches: int = 0
    catch_ups: int = 0
    retries: int = 0
    wipes: int = 0
    lag: dict[TopicPartition, int] = field(default_factory=dict)
    assigned: set[TopicPartition] = field(default_factory=set)
    namespace: str | None = None
    rebuild_target: int = 0  # records of the catch-ups and rebuilds started so far
    rebuild_done: int = 0  # of them, applied (or passed: transaction markers)
    _samples: deque[tuple[float, int]] = field(default_factory=deque)

    def count_applied(self, n: int) -> None:
        """Add ``n`` applied events and sample the rate."""
        self.applied += n
        now = time.monotonic()
        self._samples.append((now, self.applied))
        while self._samples and now - self._samples[0][0] > _RATE_WINDOW_S:
            self._samples.popleft()

    def count_alerts(self, codes: Iterable[str]) -> None:
        """Add raised alerts, by code."""
        for code in codes:
            self.alerts += 1
            self.alerts_by_code[code] = self.alerts_by_code.get(code, 0) + 1

    def rebuild_progress(self) -> float:
        """Share of the catch-up and rebuild records applied (1.0 when none were asked)."""
        if self.rebuild_target == 0:
            return 1.0
        return min(1.0, self.rebuild_done / self.rebuild_target)

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
            "events_held": self.held,
            "parked_overflow_rereads": self.rereads,
            "stale_rejected": self.stale,
            "fence_conflicts": self.conflicts,
            "dead_lettered": self.dead_lettered,
            "alerts_sent": self.alerts,
            "alerts_by_code": dict(sorted(self.alerts_by_code.items())),
            "rebuild_progress": round(self.rebuild_progress(), 4),
            "write_conflicts": self.write_conflicts,
            "batches": self.batches,
            "catch_ups": self.catch_ups,
            "retries": self.retries,
            "views_wiped": self.wipes,
            "assigned": sorted(f"{t}:{p}" for t, p in self.assigned),
            "lag": {f"{t}:{p}": n for (t, p), n in sorted(self.lag.items())},
        }
