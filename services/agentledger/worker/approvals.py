"""Approval validation: an approval counts only for its generation, intent and time (inv. 8)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agentledger.views import Approval

Status = Literal[
    "approved", "rejected", "pending", "expired", "revoked", "other_generation", "other_intent"
]


@dataclass(frozen=True)
class ApprovalVerdict:
    """Whether an approval lets the intent go ahead, and a sentence saying why (not)."""

    status: Status
    reason: str
    approval: Approval | None = None

    @property
    def usable(self) -> bool:
        """True only for a valid, unexpired, unrevoked approval of this generation and intent."""
        return self.status == "approved"


def _latest_by_id(approvals: Sequence[Approval]) -> list[Approval]:
    """The last decision recorded for each approval id, in order of that last decision."""
    latest: dict[str, Approval] = {}
    for approval in approvals:
        latest.pop(approval.approval_id, None)
        latest[approval.approval_id] = approval
    return list(latest.values())


def _judge(chosen: Approval, now: int) -> ApprovalVerdict:
    """The verdict of the latest decision recorded for the right generation and intent."""
    who = chosen.approver or "someone"
    if chosen.decision == "rejected":
        return ApprovalVerdict("rejected", f"rejected by {who}", chosen)
    if chosen.decision == "revoked":
        return ApprovalVerdict("revoked", f"approval {chosen.approval_id} was revoked", chosen)
    if chosen.expires_at is not None and now > chosen.expires_at:
        reason = f"approval {chosen.approval_id} expired at {chosen.expires_at} (now {now})"
        return ApprovalVerdict("expired", reason, chosen)
    return ApprovalVerdict("approved", f"approved by {who}", chosen)


def validate(
    approvals: Sequence[Approval],
    *,
    generation: int,
    intent_hash: str,
    now: int,
    asked_expires_at: int | None = None,
) -> ApprovalVerdict:
    """Re-validate the decisions recorded for an intent, as a resume must before using one.

    The latest decision for this generation and intent wins: approved and unexpired is usable;
    a revocation voids an approval; an approval of another generation (a fork or restore) or
    of another intent is never used, whatever it says.
    """
    latest = _latest_by_id(approvals)
    mine = [a for a in latest if a.generation == generation and a.intent_hash == intent_hash]
    if mine:
        return _judge(mine[-1], now)
    same_intent = [a for a in latest if a.intent_hash == intent_hash]
    if same_intent:
        other = same_intent[-1]
        reason = (
            f"approval {other.approval_id} was issued for generation {other.generation}, "
            f"the run is in generation {generation}"
        )
        return ApprovalVerdict("other_generation", reason, other)
    if asked_expires_at is not None and now > asked_expires_at:
        return ApprovalVerdict("expired", f"the request expired at {asked_expires_at} (now {now})")
    approved = [a for a in latest if a.generation == generation and a.decision == "approved"]
    if approved:
        other = approved[-1]
        reason = (
            f"approval {other.approval_id} approves intent {other.intent_hash}, not {intent_hash}"
        )
        return ApprovalVerdict("other_intent", reason, other)
    return ApprovalVerdict("pending", "no decision yet")
