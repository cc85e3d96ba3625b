"""The reconciler's decisions about open intents, as plain functions of what it knows.

:func:`decide` (the core's one lookup decision, :mod:`agentledger._core.lookup`) turns one
provider answer into a finding; :func:`plan_run` turns the findings of one run, against the
run's latest view, into the events to write (as the lease holder), the requests to send and the
alerts to raise or clear. Nothing here performs I/O.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentledger._core.lookup import Resolution, decide
from agentledger.alerts.codes import EFFECT_IDENTITY_MISMATCH, EFFECT_UNKNOWN
from agentledger.alerts.model import AlertCondition, condition_key
from agentledger.events.ids import fresh_event_id
from agentledger.events.models import (
    FINISHED_STATUSES,
    EffectReconciled,
    ResumeRequested,
    RunEvent,
    RunPaused,
)
from agentledger.leases import Lease
from agentledger.views.model import OPEN_EFFECT_STATES, EffectView, RunView

#: Pause reasons the reconciler sets, and lifts (by requesting a resume) once resolved.
EFFECT_UNKNOWN_REASON = "effect_unknown"
IDENTITY_MISMATCH_REASON = "effect_identity_mismatch"
RESUMABLE_PAUSES: frozenset[str] = frozenset({EFFECT_UNKNOWN_REASON})
#: The run fields :func:`intent_due` and :func:`plan_run` read (with the effects), and the
#: fence a claim compares: a pass's batch claims read only these (brief views, DESIGN.md §19).
PLAN_FIELDS: frozenset[str] = frozenset({"run_id", "status", "pause", "applied_seq", "fence"})

__all__ = [
    "EFFECT_UNKNOWN_REASON",
    "IDENTITY_MISMATCH_REASON",
    "PLAN_FIELDS",
    "RESUMABLE_PAUSES",
    "Resolution",
    "RunPlan",
    "decide",
    "effect_condition",
    "effect_condition_keys",
    "intent_due",
    "plan_run",
]


def intent_due(
    intent: EffectView, view: RunView, lease: Lease | None, now: int, grace_ms: int
) -> bool:
    """True when the reconciler should ask the provider about ``intent`` now.

    Open, older than the grace period, and no live writer holds the run (a live writer resolves
    its own intents). An intent already found UNKNOWN in a finished run was left to a person.
    """
    if intent.state not in OPEN_EFFECT_STATES or lease is not None:
        return False
    if view.status in FINISHED_STATUSES and intent.state == "unknown":
        return False
    return now - intent.intended_at >= grace_ms


@dataclass
class RunPlan:
    """What to do for one run: events (as the lease holder), requests, alerts to raise/clear."""

    events: list[RunEvent] = field(default_factory=list)
    requests: list[ResumeRequested] = field(default_factory=list)
    raise_: list[AlertCondition] = field(default_factory=list)
    clear: dict[str, str] = field(default_factory=dict)


def effect_condition(view: RunView, intent: EffectView, resolution: Resolution) -> AlertCondition:
    """The alert for an intent the provider could not settle."""
    code = EFFECT_IDENTITY_MISMATCH if resolution.identity_mismatch else EFFECT_UNKNOWN
    return AlertCondition(
        code=code.code,
        run_id=view.run_id,
        step=intent.step,
        effect=intent.effect,
        idempotency_key=intent.idempotency_key,
        summary=f"{code.title}: {intent.effect} ({intent.kind} at {intent.provider or '?'}) of "
        f"run {view.run_id} step {intent.step}: {resolution.detail}",
        detail={
            "provider": intent.provider,
            "kind": intent.kind,
            "identity_hash": intent.identity_hash,
            "intended_at": intent.intended_at,
            "finding": resolution.detail,
        },
    )


def effect_condition_keys(run_id: str, key: str) -> list[str]:
    """The condition keys of the alerts an intent can raise (to clear them once resolved)."""
    return [
        condition_key(c.code, run_id=run_id, idempotency_key=key)
        for c in (EFFECT_UNKNOWN, EFFECT_IDENTITY_MISMATCH)
    ]


def plan_run(
    view: RunView,
    resolutions: Sequence[Resolution],
    *,
    fence: int,
    writer: str,
    now: int,
) -> RunPlan:
    """The writes for ``resolutions`` against the run's latest ``view``, with seqs after it.

    A finding is written when it changes the effect's state (LANDED, NOT_LANDED, or intended ->
    UNKNOWN). Any UNKNOWN pauses a running run; once no intent is open, a run that was running or
    paused for an unknown effect gets a ResumeRequested.

    Each event gets its id from ``fresh_event_id`` (the run writer's, same form as the model's
    default): pydantic's call of a default factory costs a third of building the event.
    """
    plan = RunPlan()
    seqs = itertools.count(view.applied_seq + 1)
    unknown: list[tuple[EffectView, Resolution]] = []
    resolved_keys: set[str] = set()

    for res in resolutions:
        intent = view.effects.get(res.idempotency_key)
        if intent is None or intent.state not in OPEN_EFFECT_STATES:
            continue
        if res.resolved or intent.state == "intended":
            plan.events.append(
                EffectReconciled(
                    event_id=fresh_event_id(),
                    run_id=view.run_id,
                    seq=next(seqs),
                    fence=fence,
                    worker_id=writer,
                    occurred_at=now,
                    step=intent.step,
                    effect=intent.effect,
                    idempotency_key=intent.idempotency_key,
                    finding=res.finding,
                    external_ref=res.external_ref,
                    response_hash=res.response_hash,
                    detail=res.detail,
                )
            )
        if res.resolved:
            resolved_keys.add(intent.idempotency_key)
            for key in effect_condition_keys(view.run_id, intent.idempotency_key):
                plan.clear[key] = f"{res.finding}: {res.detail}"
        else:
            unknown.append((intent, res))
            plan.raise_.append(effect_condition(view, intent, res))

    still_open = [e for e in view.open_effects() if e.idempotency_key not in resolved_keys]
    if unknown and view.status in {"running", "new"}:
        first, first_res = unknown[0]
        mismatch = any(r.identity_mismatch for _, r in unknown)
        plan.events.append(
            RunPaused(
                event_id=fresh_event_id(),
                run_id=view.run_id,
                seq=next(seqs),
                fence=fence,
                worker_id=writer,
                occurred_at=now,
                reason=IDENTITY_MISMATCH_REASON if mismatch else EFFECT_UNKNOWN_REASON,
                step=first.step,
                payload_json=json.dumps(
                    {
                        "question": "did these effects happen? the provider cannot tell",
                        "idempotency_keys": [i.idempotency_key for i, _ in unknown],
                        "finding": first_res.detail,
                    },
                    sort_keys=True,
                ),
            )
        )
    resumable = view.status in {"running", "new"} or (
        view.status == "paused" and view.pause is not None and view.pause.reason in RESUMABLE_PAUSES
    )
    if resolved_keys and not still_open and not unknown and resumable:
        plan.requests.append(
            ResumeRequested(
                event_id=fresh_event_id(),
                occurred_at=now,
                run_id=view.run_id,
                reason=f"reconciled {len(resolved_keys)} open intent(s)",
                requested_by=writer,
            )
        )
    return plan
