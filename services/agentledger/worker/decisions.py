"""Recording a human decision on a paused run (ApprovalDecided), as an SDK call."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from agentledger._core.loader import load_view
from agentledger._core.session import Services
from agentledger._core.writer import RunWriter
from agentledger.errors import ApprovalError
from agentledger.events.models import ApprovalDecided, Decision, Event
from agentledger.views import RunView
from agentledger.views.model import Approval


def standing_decision(view: RunView, intent_hash: str, now_ms: int) -> Approval | None:
    """The decision in force on ``intent_hash`` this generation: not revoked, not expired."""
    latest = None
    for approval in view.approvals:
        if approval.intent_hash == intent_hash and approval.generation == view.generation:
            latest = approval
    if latest is None or latest.decision == "revoked":
        return None
    if latest.expires_at is not None and latest.expires_at <= now_ms:
        return None
    return latest


async def decide(
    services: Services,
    run_id: str,
    decision: Decision,
    *,
    approver: str,
    intent_hash: str | None = None,
    expires_at: int | None = None,
    note: str = "",
    approval_id: str | None = None,
    also: Sequence[Event] = (),
) -> ApprovalDecided:
    """Append ApprovalDecided to the run, bound to its generation and the intent it approves.

    ``intent_hash`` defaults to the one the run's pause asks about. The decision is written
    under a short lease (fence above the log's), like any other write to the run. ``also``
    (e.g. a ResumeRequested) is written in the same transaction.
    """
    view = (
        await load_view(services.log, run_id, reader=services.views, barrier_s=services.barrier_s)
    ).view
    wanted = intent_hash or (view.pause.intent_hash if view.pause is not None else None)
    if wanted is None:
        msg = "the run waits for no approval; name the intent hash to decide on"
        raise ApprovalError(msg, run_id=run_id)
    standing = standing_decision(view, wanted, services.clock())
    if standing is not None and decision != "revoked":
        # Approve twice, then reject: three contradicting records, and which one counts would
        # depend on who reads first. A standing decision is revoked before another is made.
        msg = (
            f"intent {wanted[:12]} is already {standing.decision} by {standing.approver or '?'}; "
            f"refusing to record {decision} as well (revoke it first)"
        )
        raise ApprovalError(msg, run_id=run_id)
    lease = await services.leases.acquire(
        run_id, services.worker_id, services.lease_ttl_ms, floor=view.fence
    )
    try:
        writer = RunWriter(
            services.log,
            view,
            fence=lease.fence,
            worker_id=services.worker_id,
            clock=services.clock,
        )
        event = writer.append(
            ApprovalDecided,
            approval_id=approval_id or uuid.uuid4().hex,
            decision=decision,
            approver=services.payloads.text(approver),
            generation=view.generation,
            intent_hash=wanted,
            expires_at=expires_at,
            note=services.payloads.text(note),
        )
        writer.pending.extend(also)
        await writer.flush()
        return event
    finally:
        await services.leases.release(lease)
