"""Deciding on a paused run from outside a worker: ApprovalDecided plus a resume request.

The decision is written as the run's lease holder (the SDK's :meth:`Ledger.decide`: lease with
floor = the log's fence, next seq, release) and the ResumeRequested rides in the same Kafka
transaction, so a decision is never recorded without the fleet being asked to act on it. The
resumed run re-validates the approval (generation, intent hash, expiry, not revoked) before it
uses it, and refuses it otherwise.
"""

from __future__ import annotations

import asyncio
import time

from agentledger._core.loader import load_view
from agentledger.errors import ApprovalError, LeaseHeldError
from agentledger.events.models import (
    FINISHED_STATUSES,
    ApprovalDecided,
    Decision,
    ResumeRequested,
    now_ms,
)
from agentledger.fleet.settings import FleetSettings
from agentledger.fleet.stable import StableBarrier
from agentledger.fleet.wiring import operator
from agentledger.worker import Ledger

RETRY_S = 0.2


async def decide_run(
    ledger: Ledger,
    run_id: str,
    decision: Decision,
    *,
    approver: str,
    expires_at: int | None = None,
    intent_hash: str | None = None,
    note: str = "",
    resume: bool = True,
    lease_wait_s: float = 30.0,
    barrier: StableBarrier | None = None,
) -> ApprovalDecided:
    """Record ``decision`` on the approval ``run_id`` waits for (or on ``intent_hash``).

    Waits up to ``lease_wait_s`` while a worker still holds the run's lease (it is pausing).
    Raises ApprovalError when the run has finished or waits for no approval and no intent hash
    was named.
    """
    if barrier is not None:
        await barrier.wait(run_id)
    services = ledger.services
    view = (
        await load_view(services.log, run_id, reader=services.views, barrier_s=services.barrier_s)
    ).view
    if view.status == "new":
        raise ApprovalError("no such run (it has no events)", run_id=run_id)
    if view.status in FINISHED_STATUSES:
        raise ApprovalError(f"the run is {view.status}; there is nothing to decide", run_id=run_id)
    waiting = view.pause is not None and view.pause.reason == "approval"
    if not waiting and intent_hash is None:
        state = view.status + (f" ({view.pause.reason})" if view.pause is not None else "")
        msg = f"the run is {state}, not waiting for an approval (name --intent-hash to decide)"
        raise ApprovalError(msg, run_id=run_id)
    also = (
        [ResumeRequested(run_id=run_id, reason=f"{decision} by {approver}", requested_by=approver)]
        if resume
        else []
    )
    deadline = time.monotonic() + lease_wait_s
    while True:
        try:
            return await ledger.decide(
                run_id,
                decision,
                approver=approver,
                intent_hash=intent_hash,
                expires_at=expires_at,
                note=note,
                also=also,
            )
        except LeaseHeldError:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(RETRY_S)


async def decide_as_operator(
    settings: FleetSettings,
    run_id: str,
    decision: Decision,
    *,
    approver: str,
    expires_in_s: float | None = None,
    intent_hash: str | None = None,
    note: str = "",
    resume: bool = True,
) -> ApprovalDecided:
    """``runs approve|reject`` (and the console's buttons): :func:`decide_run` as an operator.

    An approval is valid for ``expires_in_s`` (default ``approval_ttl_s``) from now.
    """
    expires_at = None
    if decision == "approved":
        ttl = expires_in_s if expires_in_s is not None else settings.approval_ttl_s
        if ttl <= 0:
            msg = f"an approval valid for {ttl} s has expired before it is recorded"
            raise ApprovalError(msg, run_id=run_id)
        expires_at = now_ms() + int(ttl * 1000)
    async with operator(settings, approver) as op:
        return await decide_run(
            op.ledger, run_id, decision, approver=approver, expires_at=expires_at,
            intent_hash=intent_hash, note=note, resume=resume,
            lease_wait_s=settings.approval_lease_wait_s, barrier=op.barrier,
        )  # fmt: skip
