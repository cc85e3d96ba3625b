"""The pure fold: run events in, resume view out. The SDK and the projector share it.

:func:`fold` admits events in ``seq`` order (skipping duplicates, parking those ahead of a gap,
rejecting stale fences) and applies each admitted one with :func:`apply_event`. The same events,
delivered in any order that keeps each topic's order and with any duplicates, give the same view.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pydantic import BaseModel, ValidationError

from agentledger.errors import DecodeError
from agentledger.events.models import (
    EVENT_TYPES,
    FINISHED_STATUSES,
    AcceptanceEvaluated,
    ActivityRecorded,
    ApprovalDecided,
    CheckpointSaved,
    CheckpointsDeleted,
    EffectCompensated,
    EffectIntended,
    EffectReconciled,
    EffectRecorded,
    PlanRevised,
    RunEvent,
    RunFinished,
    RunForked,
    RunPaused,
    RunResumed,
    RunStarted,
    StepCheckpointed,
    StepRejected,
    StepStarted,
    WritesSaved,
)
from agentledger.views import graph_fold
from agentledger.views.graph_fold import checkpoint_problem
from agentledger.views.model import (
    ActivityView,
    Approval,
    CheckView,
    EffectView,
    Pause,
    RunView,
    StepView,
    Versions,
    made,
)

#: What a finished run still accepts: what the reconciler and operators record about its
#: effects afterwards (a lookup's finding, a compensation). Anything else written after
#: RunFinished is refused (forged or misplaced: it would rewrite a finished run).
AFTER_FINISH: tuple[type[RunEvent], ...] = (EffectReconciled, EffectCompensated)
#: How many of the last applied seqs keep a digest of their event, to tell a redelivery of one
#: (same content) from a second, different event written at that seq.
RECENT_DIGESTS = 16

_UNDIGESTED: set[str] = {"event_id", "occurred_at"}  # what event_digest leaves out
_DIGEST_PREFIX: dict[type[RunEvent], bytes] = {
    kind: f"{kind.__name__}:".encode() for kind in EVENT_TYPES if issubclass(kind, RunEvent)
}
#: The view fields every applied event sets (besides fence_since_seq when the fence rises).
_ENVELOPE = frozenset({"applied_seq", "fence", "worker_id", "updated_at"})
_FINDING_STATE = {"LANDED": "landed", "NOT_LANDED": "not_landed", "UNKNOWN": "unknown"}
_RESOLVED_STATES = frozenset({"succeeded", "failed", "landed", "compensated"})


class Admission(Enum):
    """What to do with an incoming event given the run's view."""

    APPLY = "apply"
    DUPLICATE = "duplicate"
    PARK = "park"
    STALE = "stale"
    CONFLICT = "conflict"
    DIVERGENT = "divergent"
    CLOSED = "closed"


def event_digest(event: RunEvent) -> str:
    """A short digest of what ``event`` says: its type, envelope and fields, but not its id or
    time (a writer that sends an event again after an unknown outcome may stamp new ones)."""
    # the bytes of f"{name}:{event.model_dump_json(exclude=...)}", without model_dump_json's
    # wrapper and the text round trip (a stored view keeps digests: never change what is hashed)
    kind = type(event)
    body = kind.__pydantic_serializer__.to_json(event, exclude=_UNDIGESTED)
    prefix = _DIGEST_PREFIX.get(kind) or f"{kind.__name__}:".encode()
    return hashlib.sha256(prefix + body).hexdigest()[:16]


def admit(view: RunView, event: RunEvent) -> Admission:
    """Decide whether ``event`` is next in the run's sequence, and from a current writer.

    A lower fence at a position the current fence already owns is a zombie write (STALE); a
    lower fence before that position is a redelivery (DUPLICATE), and so is the same fence at a
    taken position, unless the event differs from the one applied there (DIVERGENT: two events
    claim one seq). A higher fence at a position already taken means a takeover raced a zombie
    write (CONFLICT): the new writer must re-claim. A finished run accepts only the events of
    :data:`AFTER_FINISH` (CLOSED otherwise, never parked: it could never be applied).
    """
    if event.seq <= view.applied_seq:
        return _taken(view, event)
    if event.fence < view.fence:
        return Admission.STALE
    if view.status in FINISHED_STATUSES and not isinstance(event, AFTER_FINISH):
        return Admission.CLOSED
    if event.seq > view.applied_seq + 1:
        return Admission.PARK
    return Admission.APPLY


def _taken(view: RunView, event: RunEvent) -> Admission:
    """The verdict on an event at a seq the view has already applied."""
    if event.fence < view.fence and event.seq >= view.fence_since_seq:
        return Admission.STALE
    if event.fence > view.fence:
        return Admission.CONFLICT
    recorded = view.recent_digests.get(event.seq)
    if recorded is not None and recorded != event_digest(event):
        return Admission.DIVERGENT
    return Admission.DUPLICATE


@dataclass
class FoldResult:
    """The new view and what happened to every event given to :func:`fold`."""

    view: RunView
    applied: list[RunEvent] = field(default_factory=list)
    duplicates: list[RunEvent] = field(default_factory=list)
    parked: list[RunEvent] = field(default_factory=list)
    stale: list[RunEvent] = field(default_factory=list)
    conflicts: list[RunEvent] = field(default_factory=list)
    divergent: list[RunEvent] = field(default_factory=list)
    closed: list[RunEvent] = field(default_factory=list)
    touched_steps: set[int] = field(default_factory=set)
    touched_effects: set[str] = field(default_factory=set)


def fold(view: RunView, events: list[RunEvent], *, in_place: bool = False) -> FoldResult:
    """Admit and apply ``events`` (any order) to ``view``; events still ahead of a gap are parked.

    With ``in_place=False`` (default) ``view`` is not modified; the SDK folds its own writes with
    ``in_place=True`` to avoid copying a long run's view at every step.
    """
    current = view if in_place else view.model_copy(deep=True)
    result = FoldResult(view=current)
    pending: dict[int, list[RunEvent]] = {}
    for event in events:
        if event.run_id != current.run_id:
            msg = f"event of run {event.run_id} folded into view of run {current.run_id}"
            raise ValueError(msg)
        pending.setdefault(event.seq, []).append(event)
    for seq in sorted(pending):
        for event in pending[seq]:
            verdict = admit(current, event)
            if verdict is Admission.APPLY:
                apply_event(current, event, result)
                result.applied.append(event)
            elif verdict is Admission.DUPLICATE:
                result.duplicates.append(event)
            elif verdict is Admission.STALE:
                result.stale.append(event)
            elif verdict is Admission.CONFLICT:
                result.conflicts.append(event)
            elif verdict is Admission.DIVERGENT:
                result.divergent.append(event)
            elif verdict is Admission.CLOSED:
                result.closed.append(event)
            else:
                result.parked.append(event)
    return result


def _assign(model: BaseModel, values: dict[str, Any]) -> None:
    """Set fields of a view model as its ``model.field = value`` would (view models validate
    no assignment), without a Python-level ``__setattr__`` call per field."""
    model.__dict__.update(values)
    model.__pydantic_fields_set__.update(values)


def apply_event(
    view: RunView, event: RunEvent, result: FoldResult | None = None, *, digest: bool = True
) -> None:
    """Apply one admitted event to ``view`` in place (the envelope, then the event's own fields).

    ``digest=False`` leaves the event's entry of ``recent_digests`` to a later
    :func:`note_digests` (the run's writer, whose own events never meet a digest: DESIGN.md
    §13, session 17); every other field is applied alike.
    """
    fields = view.__dict__
    seq, fence = event.seq, event.fence
    if fence > fields["fence"]:
        fields["fence_since_seq"] = seq
        view.__pydantic_fields_set__.add("fence_since_seq")
    fields["applied_seq"] = seq
    if digest:
        digests = fields["recent_digests"]
        digests[seq] = event_digest(event)
        oldest = seq - RECENT_DIGESTS
        if min(digests) <= oldest:  # one C-level pass; the Python loop only when one is due
            for old in [s for s in digests if s <= oldest]:
                del digests[old]
    fields["fence"] = max(fields["fence"], fence)
    fields["worker_id"] = event.worker_id
    fields["updated_at"] = event.occurred_at
    view.__pydantic_fields_set__.update(_ENVELOPE)
    touched = result if result is not None else FoldResult(view=view)
    handler = _HANDLERS.get(type(event))
    if handler is not None:
        handler(view, event, touched)


def note_digests(view: RunView, events: Iterable[RunEvent]) -> None:
    """Record in ``view.recent_digests`` the digests of ``events``, applied to it in this order
    with ``digest=False``: the same entries :func:`apply_event` would have left. The events
    may start anywhere after the last digested one, as long as every event they skip is
    :data:`RECENT_DIGESTS` or more seqs below the last (its entry would be dropped anyway)."""
    digests = view.__dict__["recent_digests"]
    for event in events:
        seq = event.seq
        digests[seq] = event_digest(event)
        oldest = seq - RECENT_DIGESTS
        if min(digests) <= oldest:
            for old in [s for s in digests if s <= oldest]:
                del digests[old]


def _started(view: RunView, e: Any, _: FoldResult) -> None:
    ev: RunStarted = e
    _assign(
        view,
        {
            "status": "running",
            "agent": ev.agent,
            "input_json": ev.input_json,
            "plan": list(ev.plan),
            "plan_version": ev.plan_version,
            "generation": ev.generation,
            "version_policy": ev.version_policy,
            "versions": Versions(
                code=ev.code_version,
                prompt=ev.prompt_version,
                tool_schema=ev.tool_schema_version,
                model=ev.model_version,
            ),
        },
    )
    _assign(
        view.budget,
        {
            "max_tokens": ev.max_tokens,
            "max_usd": ev.max_usd,
            "max_steps": ev.max_steps,
            "max_consecutive_errors": ev.max_consecutive_errors,
            "deadline_at": ev.deadline_at,
        },
    )
    _assign(view, {"started_at": ev.occurred_at})


def _plan_revised(view: RunView, e: Any, _: FoldResult) -> None:
    ev: PlanRevised = e
    view.plan = list(ev.plan)
    view.plan_version = ev.plan_version


def _step_started(view: RunView, e: Any, r: FoldResult) -> None:
    ev: StepStarted = e
    previous = view.steps.get(ev.step)
    step = made(
        StepView,
        {
            "step": ev.step,
            "name": ev.step_name,
            "attempt": ev.attempt,
            "attempts": (previous.attempts if previous else 0) + 1,
        },
    )
    if previous is not None and previous.attempt == ev.attempt:
        # the same attempt started again after a crash: its recorded activities stay reusable
        step.activities = previous.activities
        step.attempts = previous.attempts
    view.steps[ev.step] = step
    budget = view.budget
    _assign(budget, {"steps": budget.steps + 1})
    r.touched_steps.add(ev.step)


def _step_of(view: RunView, index: int, name: str = "") -> StepView:
    step = view.steps.get(index)
    if step is None:
        step = made(StepView, {"step": index, "name": name or _plan_name(view, index)})
        view.steps[index] = step
    return step


def _plan_name(view: RunView, index: int) -> str:
    return view.plan[index] if 0 <= index < len(view.plan) else f"step-{index}"


def _activity(view: RunView, e: Any, r: FoldResult) -> None:
    ev: ActivityRecorded = e
    step = _step_of(view, ev.step)
    if ev.attempt == step.attempt:
        step.activities[ev.ordinal] = made(
            ActivityView,
            {
                "ordinal": ev.ordinal,
                "name": ev.name,
                "kind": ev.kind,
                "result_json": ev.result_json,
                "result_ref_uri": ev.result_ref_uri,
                "result_ref_hash": ev.result_ref_hash,
                "source_uri": ev.source_uri,
                "content_hash": ev.content_hash,
                "read_at": ev.read_at,
                "tokens": ev.tokens,
                "usd": ev.usd,
            },
        )
    budget = view.budget
    _assign(budget, {"tokens": budget.tokens + ev.tokens, "usd": budget.usd + ev.usd})
    r.touched_steps.add(ev.step)


def _checkpointed(view: RunView, e: Any, r: FoldResult) -> None:
    ev: StepCheckpointed = e
    step = _step_of(view, ev.step, ev.step_name)
    _assign(
        step,
        {
            "status": "checkpointed",
            "attempt": ev.attempt,
            "result_json": ev.result_json,
            "result_ref_uri": ev.result_ref_uri,
            "result_ref_hash": ev.result_ref_hash,
        },
    )
    _assign(view.budget, {"consecutive_errors": 0})
    _advance_cursor(view)
    r.touched_steps.add(ev.step)


def _advance_cursor(view: RunView) -> None:
    # steps before the cursor are checkpointed for good: scan on from it, not from step 0,
    # so folding a long run stays linear
    cursor = view.cursor
    while (step := view.steps.get(cursor)) is not None and step.status == "checkpointed":
        cursor += 1
    _assign(view, {"cursor": cursor})


def _rejected(view: RunView, e: Any, r: FoldResult) -> None:
    ev: StepRejected = e
    step = _step_of(view, ev.step, ev.step_name)
    step.status = "rejected"
    step.attempt = ev.attempt
    step.last_reason = ev.reason
    step.result_json = ev.result_json
    view.budget.consecutive_errors += 1
    r.touched_steps.add(ev.step)


def _acceptance(view: RunView, e: Any, r: FoldResult) -> None:
    ev: AcceptanceEvaluated = e
    step = _step_of(view, ev.step)
    if ev.attempt == step.attempt:
        check = {"check": ev.check, "passed": ev.passed, "detail": ev.detail}
        step.checks.append(made(CheckView, check))
    r.touched_steps.add(ev.step)


def _paused(view: RunView, e: Any, _: FoldResult) -> None:
    ev: RunPaused = e
    view.status = "paused"
    view.pause = Pause(
        reason=ev.reason,
        step=ev.step,
        payload_json=ev.payload_json,
        intent_hash=ev.intent_hash,
        expires_at=ev.expires_at,
        paused_at=ev.occurred_at,
    )


def _approval(view: RunView, e: Any, _: FoldResult) -> None:
    ev: ApprovalDecided = e
    view.approvals.append(
        Approval(
            approval_id=ev.approval_id,
            decision=ev.decision,
            approver=ev.approver,
            generation=ev.generation,
            intent_hash=ev.intent_hash,
            expires_at=ev.expires_at,
            decided_at=ev.occurred_at,
            note=ev.note,
        )
    )


def _resumed(view: RunView, e: Any, _: FoldResult) -> None:
    ev: RunResumed = e
    if view.status not in FINISHED_STATUSES:
        view.status = "running"
    view.pause = None
    if ev.policy_applied in {"continue", "replan"}:
        view.versions = Versions(
            code=ev.code_version,
            prompt=ev.prompt_version,
            tool_schema=ev.tool_schema_version,
            model=ev.model_version,
        )


def inherited_of(ev: RunForked) -> tuple[list[StepView], list[EffectView]]:
    """The steps and effects a fork inherits, read from its ``inherited_json`` (an object with
    lists ``steps`` and ``effects`` of views, as the worker writes it; null or empty: none).
    Raises DecodeError saying what is wrong otherwise: such a RunForked is a malformed event,
    which the projector dead-letters before folding (``projector/applier.py``)."""
    what = f"RunForked of run {ev.run_id} at seq {ev.seq}: inherited_json"
    try:
        inherited = json.loads(ev.inherited_json) or {}
    except ValueError as e:
        raise DecodeError(f"{what} is not JSON ({e})") from e
    if not isinstance(inherited, dict):
        raise DecodeError(f"{what} is a JSON {type(inherited).__name__}, not an object")
    steps, effects = inherited.get("steps", []), inherited.get("effects", [])
    if not isinstance(steps, list) or not isinstance(effects, list):
        raise DecodeError(f"{what} has steps or effects that are not lists")
    try:
        found = (
            [StepView.model_validate(raw) for raw in steps],
            [EffectView.model_validate(raw) for raw in effects],
        )
    except ValidationError as e:
        problem = e.errors()[0]["msg"]
        raise DecodeError(f"{what} has a step or effect that is not valid: {problem}") from e
    for step in found[0]:
        unreadable = None if step.graph is None else checkpoint_problem(step.graph.checkpoint_json)
        if unreadable is not None:
            raise DecodeError(f"{what} has a step whose {unreadable}")
    return found


def malformed(event: RunEvent) -> str | None:
    """Why the fold cannot read ``event`` (None when it can): a RunForked whose inherited_json
    is not what the worker writes, or a CheckpointSaved whose checkpoint_json a later deletion
    could not read. Such an event is dead-lettered instead of folded (and is a corrupt record
    to the worker's ``read_run``)."""
    if type(event) is RunForked:
        try:
            inherited_of(event)
        except DecodeError as e:
            return e.reason
    elif type(event) is CheckpointSaved:
        problem = checkpoint_problem(event.checkpoint_json)
        if problem is not None:
            return f"CheckpointSaved of run {event.run_id} at seq {event.seq}: {problem}"
    return None


def _forked(view: RunView, e: Any, r: FoldResult) -> None:
    ev: RunForked = e
    steps, effects = inherited_of(ev)
    view.parent_run_id = ev.parent_run_id
    view.forked_from_step = ev.from_step
    view.generation = ev.generation
    for step in steps:
        step.inherited = True
        view.steps[step.step] = step
        r.touched_steps.add(step.step)
    for effect in effects:
        effect.inherited = True
        view.effects[effect.idempotency_key] = effect
        r.touched_effects.add(effect.idempotency_key)
    _advance_cursor(view)


def _finished(view: RunView, e: Any, _: FoldResult) -> None:
    ev: RunFinished = e
    _assign(
        view,
        {
            "status": ev.status,
            "result_json": ev.result_json,
            "error": ev.error,
            "finished_at": ev.occurred_at,
            "pause": None,
        },
    )


def _intended(view: RunView, e: Any, r: FoldResult) -> None:
    ev: EffectIntended = e
    existing = view.effects.get(ev.idempotency_key)
    if existing is not None and existing.state in _RESOLVED_STATES:
        return
    view.effects[ev.idempotency_key] = made(
        EffectView,
        {
            "idempotency_key": ev.idempotency_key,
            "step": ev.step,
            "ordinal": ev.ordinal,
            "effect": ev.effect,
            "provider": ev.provider,
            "kind": ev.kind,
            "identity_hash": ev.identity_hash,
            "payload_hash": ev.payload_hash,
            "request_json": ev.request_json,
            "intended_at": existing.intended_at if existing else ev.occurred_at,
        },
    )
    r.touched_effects.add(ev.idempotency_key)


def _effect_of(view: RunView, key: str, step: int, name: str) -> EffectView:
    effect = view.effects.get(key)
    if effect is None:
        # an outcome without a visible intent (e.g. the intent's topic was truncated): keep it
        effect = made(
            EffectView,
            {
                "idempotency_key": key,
                "step": step,
                "ordinal": -1,
                "effect": name,
                "provider": "",
                "kind": "",
                "identity_hash": "",
                "payload_hash": "",
            },
        )
        view.effects[key] = effect
    return effect


def _recorded(view: RunView, e: Any, r: FoldResult) -> None:
    ev: EffectRecorded = e
    effect = _effect_of(view, ev.idempotency_key, ev.step, ev.effect)
    _assign(
        effect,
        {
            "state": ev.outcome,
            "external_ref": ev.external_ref,
            "response_hash": ev.response_hash,
            "error": ev.error,
            "resolved_at": ev.occurred_at,
        },
    )
    budget = view.budget
    _assign(budget, {"tokens": budget.tokens + ev.tokens, "usd": budget.usd + ev.usd})
    r.touched_effects.add(ev.idempotency_key)


def _reconciled(view: RunView, e: Any, r: FoldResult) -> None:
    ev: EffectReconciled = e
    effect = _effect_of(view, ev.idempotency_key, ev.step, ev.effect)
    effect.state = _FINDING_STATE[ev.finding]  # type: ignore[assignment]
    effect.detail = ev.detail
    if ev.finding == "LANDED":
        effect.external_ref = ev.external_ref
        effect.response_hash = ev.response_hash
    effect.resolved_at = ev.occurred_at
    r.touched_effects.add(ev.idempotency_key)


def _compensated(view: RunView, e: Any, r: FoldResult) -> None:
    ev: EffectCompensated = e
    effect = _effect_of(view, ev.idempotency_key, ev.step, ev.effect)
    effect.compensation_key = ev.compensation_key
    effect.compensation_ref = ev.external_ref
    effect.detail = ev.detail
    if ev.outcome == "succeeded":
        effect.state = "compensated"
    r.touched_effects.add(ev.idempotency_key)


def _graph_checkpoint(view: RunView, e: Any, r: FoldResult) -> None:
    r.touched_steps |= graph_fold.checkpoint_saved(view, e)


def _graph_writes(view: RunView, e: Any, r: FoldResult) -> None:
    r.touched_steps |= graph_fold.writes_saved(view, e)


def _graph_deleted(view: RunView, e: Any, r: FoldResult) -> None:
    r.touched_steps |= graph_fold.checkpoints_deleted(view, e)


_HANDLERS: dict[type[RunEvent], Any] = {
    RunStarted: _started,
    PlanRevised: _plan_revised,
    StepStarted: _step_started,
    ActivityRecorded: _activity,
    StepCheckpointed: _checkpointed,
    StepRejected: _rejected,
    AcceptanceEvaluated: _acceptance,
    RunPaused: _paused,
    ApprovalDecided: _approval,
    RunResumed: _resumed,
    RunForked: _forked,
    RunFinished: _finished,
    EffectIntended: _intended,
    EffectRecorded: _recorded,
    EffectReconciled: _reconciled,
    EffectCompensated: _compensated,
    CheckpointSaved: _graph_checkpoint,
    WritesSaved: _graph_writes,
    CheckpointsDeleted: _graph_deleted,
}
