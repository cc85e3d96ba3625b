"""Run-level findings as plain functions: orphans, expired pauses, overruns, due compensations."""

from __future__ import annotations

import hashlib
import json

from agentledger.alerts.codes import (
    APPROVAL_CODES,
    EFFECT_COMPENSATION_FAILED,
    EFFECT_IDENTITY_MISMATCH,
    EFFECT_NOT_COMPENSABLE,
    EFFECT_UNKNOWN,
    FENCE_STALE,
    LEASE_LOST,
    PROJECTOR_GAP,
    RUN_BUDGET_OVERRUN,
    RUN_ORPHANED,
    RUN_PAUSE_EXPIRED,
    RUN_UNREADABLE,
    RUN_VERSION_DRIFT,
)
from agentledger.alerts.model import AlertCondition, AlertRecord
from agentledger.events.models import FINISHED_STATUSES
from agentledger.leases import Lease
from agentledger.providers.protocol import MAX_KEY_LENGTH
from agentledger.views.model import OPEN_EFFECT_STATES, EffectView, RunView

_ACTIVE = frozenset({"running", "paused", "new"})
_COMPENSABLE_STATES = frozenset({"succeeded", "landed"})


def is_orphan(view: RunView, lease: Lease | None, now: int, grace_ms: int) -> bool:
    """Running, nobody holds its lease, no intent left open, and idle for the grace period.

    Runs with open intents are not orphans: the intent path resolves them first and then asks
    for the resume itself (or pauses the run).
    """
    return (
        view.status == "running"
        and lease is None
        and not view.open_effects()
        and now - view.updated_at >= grace_ms
    )


def orphan_resume_due(record: AlertRecord, opened: bool, now: int, grace_ms: int) -> bool:
    """Re-queue an orphan when its alert opens and again each grace period it stays open."""
    return opened or now - max(record.acted_at, record.opened_at) >= grace_ms


def budget_overruns(view: RunView, now: int) -> list[str]:
    """Which limits the run's spending is past (only while the run has not finished)."""
    if view.status not in _ACTIVE:
        return []
    b = view.budget
    over = []
    if b.max_tokens is not None and b.tokens > b.max_tokens:
        over.append(f"tokens {b.tokens} > {b.max_tokens}")
    if b.max_usd is not None and b.usd > b.max_usd:
        over.append(f"usd {b.usd:.4f} > {b.max_usd:.4f}")
    if b.max_steps is not None and b.steps > b.max_steps:
        over.append(f"steps {b.steps} > {b.max_steps}")
    if b.max_consecutive_errors is not None and b.consecutive_errors > b.max_consecutive_errors:
        over.append(f"consecutive errors {b.consecutive_errors} > {b.max_consecutive_errors}")
    if b.deadline_at is not None and now > b.deadline_at:
        over.append(f"deadline passed {now - b.deadline_at} ms ago")
    return over


def alerts_for(
    view: RunView, now: int, lease: Lease | None, *, orphan_grace_ms: int
) -> list[AlertCondition]:
    """The run-level conditions that hold for ``view`` now."""
    found: list[AlertCondition] = []
    pause = view.pause
    if (
        view.status == "paused"
        and pause is not None
        and pause.expires_at is not None
        and now > pause.expires_at
    ):
        found.append(
            AlertCondition(
                code=RUN_PAUSE_EXPIRED.code,
                run_id=view.run_id,
                step=pause.step,
                summary=f"run {view.run_id} is paused ({pause.reason}) and what it waits for "
                f"expired {(now - pause.expires_at) // 1000} s ago",
                detail={"reason": pause.reason, "expires_at": pause.expires_at},
            )
        )
    if is_orphan(view, lease, now, orphan_grace_ms):
        found.append(
            AlertCondition(
                code=RUN_ORPHANED.code,
                run_id=view.run_id,
                step=view.cursor,
                worker_id=None,
                summary=f"run {view.run_id} is running but no worker holds its lease "
                f"(last writer {view.worker_id or '?'}, idle {(now - view.updated_at) // 1000} s)",
                detail={"last_writer": view.worker_id, "fence": view.fence, "cursor": view.cursor},
            )
        )
    over = budget_overruns(view, now)
    if over:
        found.append(
            AlertCondition(
                code=RUN_BUDGET_OVERRUN.code,
                run_id=view.run_id,
                summary=f"run {view.run_id} is over budget: {'; '.join(over)}",
                detail={"over": over, "budget": view.budget.model_dump()},
            )
        )
    return found


def cleared(
    record: AlertRecord,
    view: RunView | None,
    lease: Lease | None,
    now: int,
    *,
    orphan_grace_ms: int,
) -> str | None:
    """Why the record's condition no longer holds, or None while it does (or only ack ends it)."""
    if record.run_id is None:
        return None
    if view is None:
        return f"run {record.run_id} is gone from the views"
    code = record.code
    if code in _EFFECT_OPEN_CODES:
        return _effect_cleared(view, record, OPEN_EFFECT_STATES)
    if code in _COMPENSATION_CODES:
        return _effect_cleared(view, record, _NOT_COMPENSATED)
    reason = None
    if code in _FINISH_CODES and view.status in FINISHED_STATUSES:
        reason = f"the run finished ({view.status})"
    elif code in _SUCCESS_CODES and view.status == "succeeded":
        reason = "the run succeeded"
    elif code == PROJECTOR_GAP.code:
        reason = _gap_cleared(view, record)
    elif code in _RUN_CODES:
        held = {c.code for c in alerts_for(view, now, lease, orphan_grace_ms=orphan_grace_ms)}
        if code not in held:
            reason = f"the run is {view.status}" + (f", held by {lease.owner}" if lease else "")
    return reason


_EFFECT_OPEN_CODES = frozenset({EFFECT_UNKNOWN.code, EFFECT_IDENTITY_MISMATCH.code})
_COMPENSATION_CODES = frozenset({EFFECT_NOT_COMPENSABLE.code, EFFECT_COMPENSATION_FAILED.code})
_RUN_CODES = frozenset({RUN_PAUSE_EXPIRED.code, RUN_ORPHANED.code, RUN_BUDGET_OVERRUN.code})
#: Codes whose condition ends with the run (a stale or lost writer, an unreadable log).
_FINISH_CODES = frozenset({FENCE_STALE.code, RUN_UNREADABLE.code, LEASE_LOST.code})
#: Codes that stop a run short of its end: a run that succeeded since has got past them.
_SUCCESS_CODES = frozenset({RUN_VERSION_DRIFT.code, *(c.code for c in APPROVAL_CODES.values())})
_NOT_COMPENSATED = frozenset({"intended", "succeeded", "failed", "unknown", "landed", "not_landed"})


def _effect_cleared(view: RunView, record: AlertRecord, holding: frozenset[str]) -> str | None:
    effect = view.effects.get(record.idempotency_key or "")
    if effect is not None and effect.state in holding:
        return None
    return f"the effect is {effect.state if effect else 'gone'} now"


def _gap_cleared(view: RunView, record: AlertRecord) -> str | None:
    detail = json.loads(record.detail_json)
    waited = detail.get("applied_seq") if isinstance(detail, dict) else None
    if isinstance(waited, int) and view.applied_seq > waited:
        return f"seq {waited + 1} arrived: the view is at seq {view.applied_seq}"
    return None


def compensation_key(idempotency_key: str) -> str:
    """The idempotency key of an effect's compensation. Never change it: retries rely on it."""
    key = f"{idempotency_key}:compensate"
    if len(key) <= MAX_KEY_LENGTH:
        return key
    return "compensate-" + hashlib.sha256(idempotency_key.encode()).hexdigest()


def compensations_due(view: RunView) -> list[EffectView]:
    """Performed effects of steps rejected for good (the run ended without success).

    While a run can still continue, a rejected step may be retried and reuse its effect under
    the same key, so nothing is undone before the run has finished.
    """
    if view.status not in FINISHED_STATUSES or view.status == "succeeded":
        return []
    due = []
    for effect in view.effects.values():
        step = view.steps.get(effect.step)
        if (
            effect.state in _COMPENSABLE_STATES
            and not effect.inherited
            and effect.compensation_key is None
            and step is not None
            and step.status == "rejected"
        ):
            due.append(effect)
    return sorted(due, key=lambda e: (e.step, e.ordinal))
