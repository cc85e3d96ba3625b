"""The alerts a fleet worker raises about itself (pure builders): each one names the worker."""

from __future__ import annotations

import json

from agentledger.alerts.codes import FENCE_STALE, LEASE_LOST, AlertCode
from agentledger.events.models import Alert

SOURCE = "fleet"

__all__ = ["FENCE_STALE", "LEASE_LOST", "SOURCE", "lease_lost_alert"]


def lease_lost_alert(
    code: AlertCode, *, run_id: str, worker_id: str, fence: int | None, reason: str
) -> Alert:
    """This worker lost a run's lease (``lease.lost``) or had writes refused (``fence.stale``)."""
    how = (
        "could not renew its lease"
        if code == LEASE_LOST
        else "had its writes refused: its fence is stale"
    )
    return Alert(
        alert_id=f"{code.code}:{run_id}:{worker_id}:{fence if fence is not None else '?'}",
        code=code.code,
        severity="critical",
        source=SOURCE,
        run_id=run_id,
        worker_id=worker_id,
        summary=(
            f"worker {worker_id} {how} on run {run_id} (fence {fence}); it abandoned the run, "
            "whose current lease holder (or the reconciler) carries it on"
        ),
        action=(
            f"check worker {worker_id}'s host: a freeze (GC, SIGSTOP, VM pause) or a partition "
            "from Redis longer than the lease ttl"
        ),
        detail_json=json.dumps({"fence": fence, "reason": reason}, sort_keys=True),
    )


def worker_fenced_alert(worker_id: str, reason: str) -> Alert:
    """This worker's transactional producer was fenced: it stops and leaves its runs to others."""
    return Alert(
        alert_id=f"{FENCE_STALE.code}:worker:{worker_id}",
        code=FENCE_STALE.code,
        severity="critical",
        source=SOURCE,
        worker_id=worker_id,
        summary=(
            f"worker {worker_id}'s Kafka producer was fenced (its transaction timed out while it "
            "was frozen, or another process uses its transactional id); the worker stopped and "
            "its runs are re-queued by the reconciler"
        ),
        action=f"restart worker {worker_id} (one process per worker id)",
        detail_json=json.dumps({"reason": reason}, sort_keys=True),
    )
