"""A rebuild's fold into plain data, encoded straight to the stored form (DESIGN.md §10).

A rebuild folds each run in memory once and writes it once, so it never needs the pydantic
view models the live projector keeps between batches: :class:`PlainRun` folds a run's events
into dicts and lists holding the very values :func:`~agentledger.views.fold.fold` puts in the
view's fields (the same admission, the same handlers, written out here for plain data), and
:meth:`PlainRun.stored` encodes them as :mod:`~agentledger.views.layout` encodes that view:
the run hash through the same :func:`~agentledger.views.layout.encode_run_values`, each step
and effect as its model's ``model_dump_json(exclude_defaults=True)`` (pydantic-core's own
serializer on the fields that differ from their defaults, in field order), packed alike.

Anything this fast path is not sure of goes to the model fold instead, for the rest of the run:
an event kind it has no handler for (forks, LangGraph checkpoints, a kind added later), a view
model whose dump is no longer its plain fields, a value ``plain_json`` will not write. The run's
plain state then becomes the :class:`~agentledger.views.model.RunView` it stands for (validated
from the same values) and :func:`~agentledger.views.fold.fold` carries on from there.
tests/unit/test_bulk_fold.py compares the stored bytes of both folds on generated sequences.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter
from typing import Any

import pydantic_core
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from agentledger.events.models import (
    FINISHED_STATUSES,
    AcceptanceEvaluated,
    ActivityRecorded,
    ApprovalDecided,
    EffectCompensated,
    EffectIntended,
    EffectReconciled,
    EffectRecorded,
    PlanRevised,
    RunEvent,
    RunFinished,
    RunPaused,
    RunResumed,
    RunStarted,
    StepCheckpointed,
    StepRejected,
    StepStarted,
)
from agentledger.views import plain_json
from agentledger.views.fold import AFTER_FINISH, RECENT_DIGESTS, event_digest
from agentledger.views.fold import fold as model_fold
from agentledger.views.layout import (
    encode_effect,
    encode_run,
    encode_run_values,
    encode_step,
    placed,
)
from agentledger.views.model import (
    OPEN_EFFECT_STATES,
    ActivityView,
    Approval,
    Budget,
    CheckView,
    EffectView,
    Pause,
    RunView,
    StepView,
    Versions,
)
from agentledger.views.packing import pack
from agentledger.views.plain_json import dumps_plainly

_MISSING = object()


def _fields(model: type[Any]) -> tuple[tuple[str, Any], ...]:
    """Each field of ``model`` in its order, with its default (``_MISSING`` when required)."""
    out = []
    for name, f in model.model_fields.items():
        if f.default_factory is not None:
            out.append((name, f.default_factory()))
        elif f.is_required():
            out.append((name, _MISSING))
        else:
            out.append((name, f.default))
    return tuple(out)


_STEP_FIELDS = _fields(StepView)
_ACTIVITY_FIELDS = _fields(ActivityView)
_CHECK_FIELDS = _fields(CheckView)
_EFFECT_FIELDS = _fields(EffectView)
_RUN_DEFAULTS = {n: d for n, d in _fields(RunView) if n not in {"steps", "effects"}}
_BUDGET_DEFAULTS = dict(_fields(Budget))
#: The exact field lists the handlers below fill; a model that gained, lost or renamed one
#: (or whose dump is not its plain fields) turns the fast path off until this module follows.
_EXPECTED: dict[type[BaseModel], str] = {
    StepView: "step name status attempt attempts result_json result_ref_uri result_ref_hash "
    "last_reason inherited activities checks graph",
    ActivityView: "ordinal name kind result_json result_ref_uri result_ref_hash source_uri "
    "content_hash read_at tokens usd",
    CheckView: "check passed detail",
    EffectView: "idempotency_key step ordinal effect provider kind identity_hash payload_hash "
    "request_json state external_ref response_hash error detail intended_at resolved_at "
    "compensation_key compensation_ref inherited",
    Versions: "code prompt tool_schema model",
    Budget: "max_tokens max_usd max_steps max_consecutive_errors deadline_at tokens usd steps "
    "consecutive_errors",
    Pause: "reason step payload_json intent_hash expires_at paused_at",
    Approval: "approval_id decision approver generation intent_hash expires_at decided_at note",
}
#: Whether the plain fold may run at all (else every run takes the model fold).
ENABLED: bool = (
    all(
        list(m.model_fields) == names.split() and dumps_plainly(m) for m, names in _EXPECTED.items()
    )
    and all(m in plain_json.PLAIN_MODELS for m in (Versions, Budget, Pause, Approval))
    # steps and effects are written by pydantic-core's to_json with the models' float rule
    and all(m.model_config.get("ser_json_inf_nan", "null") == "null" for m in _EXPECTED)
)

_FINDING_STATE = {"LANDED": "landed", "NOT_LANDED": "not_landed", "UNKNOWN": "unknown"}
_RESOLVED_STATES = frozenset({"succeeded", "failed", "landed", "compensated"})
_SEQ = attrgetter("seq")


class PlainRun:
    """One run folded into plain data (see the module); after a fallback, into its model."""

    __slots__ = ("effects", "run", "steps", "view")

    def __init__(self, run_id: str) -> None:
        run = dict(_RUN_DEFAULTS)
        run.update(
            run_id=run_id,
            plan=[],
            versions={"code": "", "prompt": "", "tool_schema": "", "model": ""},
            budget=dict(_BUDGET_DEFAULTS),
            approvals=[],
            recent_digests={},
        )
        self.run: dict[str, Any] = run
        self.steps: dict[int, dict[str, Any]] = {}
        self.effects: dict[str, dict[str, Any]] = {}
        #: the model this run is folded into once it fell back (None: still plain)
        self.view: RunView | None = None if ENABLED else RunView(run_id=run_id)

    @property
    def applied_seq(self) -> int:
        """The last seq applied."""
        return self.run["applied_seq"] if self.view is None else self.view.applied_seq

    def fold(self, events: list[RunEvent]) -> tuple[int, list[RunEvent]]:
        """Admit and apply ``events`` as :func:`~agentledger.views.fold.fold` does; returns how
        many were applied and those parked ahead of a gap."""
        if self.view is None:
            handlers = _HANDLERS
            run_id = self.run["run_id"]
            other: RunEvent | None = None
            for event in events:
                if type(event) not in handlers:
                    self.view = self.model()
                    break
                if other is None and event.run_id != run_id:
                    other = event
            else:
                if other is not None:
                    msg = f"event of run {other.run_id} folded into view of run {run_id}"
                    raise ValueError(msg)
        if self.view is not None:
            result = model_fold(self.view, events, in_place=True)
            return len(result.applied), result.parked
        return self._fold_plain(events)

    def _fold_plain(self, events: list[RunEvent]) -> tuple[int, list[RunEvent]]:
        """:meth:`fold` of events that all have a plain handler and are all of this run:
        :func:`~agentledger.views.fold.admit` (only what it changes matters here: apply, park,
        or leave the view alone) and :func:`~agentledger.views.fold.apply_event`, inline."""
        run = self.run
        handlers = _HANDLERS
        digests = run["recent_digests"]
        applied = 0
        parked: list[RunEvent] = []
        # in seq order, those of one seq in the order given (the sort is stable): the order
        # fold.py's pending dict of lists gives
        for event in sorted(events, key=_SEQ) if len(events) > 1 else events:
            seq = event.seq
            applied_seq = run["applied_seq"]
            if seq <= applied_seq:
                continue  # duplicate, stale, conflicting or divergent: the view stays
            fence = event.fence
            if fence < run["fence"]:
                continue  # stale
            if run["status"] in FINISHED_STATUSES and not isinstance(event, AFTER_FINISH):
                continue  # closed
            if seq > applied_seq + 1:
                parked.append(event)
                continue
            # apply: seqs are applied one after another from 1, so the digests' seqs are the
            # last RECENT_DIGESTS ones and only the one that falls out of them goes
            if fence > run["fence"]:
                run["fence_since_seq"] = seq
                run["fence"] = fence
            run["applied_seq"] = seq
            digests[seq] = event_digest(event)
            digests.pop(seq - RECENT_DIGESTS, None)
            run["worker_id"] = event.worker_id
            run["updated_at"] = event.occurred_at
            handlers[type(event)](self, event)
            applied += 1
        return applied, parked

    # --- the handlers: fold.py's, on plain data ----------------------------------------------

    def _started(self, ev: RunStarted) -> None:
        run = self.run
        run.update(
            status="running",
            agent=ev.agent,
            input_json=ev.input_json,
            plan=list(ev.plan),
            plan_version=ev.plan_version,
            generation=ev.generation,
            version_policy=ev.version_policy,
            versions={
                "code": ev.code_version,
                "prompt": ev.prompt_version,
                "tool_schema": ev.tool_schema_version,
                "model": ev.model_version,
            },
            started_at=ev.occurred_at,
        )
        run["budget"].update(
            max_tokens=ev.max_tokens,
            max_usd=ev.max_usd,
            max_steps=ev.max_steps,
            max_consecutive_errors=ev.max_consecutive_errors,
            deadline_at=ev.deadline_at,
        )

    def _plan_revised(self, ev: PlanRevised) -> None:
        self.run.update(plan=list(ev.plan), plan_version=ev.plan_version)

    def _step_started(self, ev: StepStarted) -> None:
        previous = self.steps.get(ev.step)
        step = _new_step(ev.step, ev.step_name)
        step["attempt"] = ev.attempt
        step["attempts"] = (previous["attempts"] if previous else 0) + 1
        if previous is not None and previous["attempt"] == ev.attempt:
            step["activities"] = previous["activities"]
            step["attempts"] = previous["attempts"]
        self.steps[ev.step] = step
        self.run["budget"]["steps"] += 1

    def _step_of(self, index: int, name: str = "") -> dict[str, Any]:
        step = self.steps.get(index)
        if step is None:
            plan = self.run["plan"]
            name = name or (plan[index] if 0 <= index < len(plan) else f"step-{index}")
            step = self.steps[index] = _new_step(index, name)
        return step

    def _activity(self, ev: ActivityRecorded) -> None:
        step = self._step_of(ev.step)
        if ev.attempt == step["attempt"]:
            step["activities"][ev.ordinal] = {
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
            }
        budget = self.run["budget"]
        budget["tokens"] += ev.tokens
        budget["usd"] += ev.usd

    def _checkpointed(self, ev: StepCheckpointed) -> None:
        step = self._step_of(ev.step, ev.step_name)
        step.update(
            status="checkpointed",
            attempt=ev.attempt,
            result_json=ev.result_json,
            result_ref_uri=ev.result_ref_uri,
            result_ref_hash=ev.result_ref_hash,
        )
        run = self.run
        run["budget"]["consecutive_errors"] = 0
        cursor = run["cursor"]
        steps = self.steps
        while (at := steps.get(cursor)) is not None and at["status"] == "checkpointed":
            cursor += 1
        run["cursor"] = cursor

    def _rejected(self, ev: StepRejected) -> None:
        step = self._step_of(ev.step, ev.step_name)
        step.update(
            status="rejected", attempt=ev.attempt, last_reason=ev.reason, result_json=ev.result_json
        )
        self.run["budget"]["consecutive_errors"] += 1

    def _acceptance(self, ev: AcceptanceEvaluated) -> None:
        step = self._step_of(ev.step)
        if ev.attempt == step["attempt"]:
            step["checks"].append({"check": ev.check, "passed": ev.passed, "detail": ev.detail})

    def _paused(self, ev: RunPaused) -> None:
        self.run["status"] = "paused"
        self.run["pause"] = {
            "reason": ev.reason,
            "step": ev.step,
            "payload_json": ev.payload_json,
            "intent_hash": ev.intent_hash,
            "expires_at": ev.expires_at,
            "paused_at": ev.occurred_at,
        }

    def _approval(self, ev: ApprovalDecided) -> None:
        self.run["approvals"].append(
            {
                "approval_id": ev.approval_id,
                "decision": ev.decision,
                "approver": ev.approver,
                "generation": ev.generation,
                "intent_hash": ev.intent_hash,
                "expires_at": ev.expires_at,
                "decided_at": ev.occurred_at,
                "note": ev.note,
            }
        )

    def _resumed(self, ev: RunResumed) -> None:
        run = self.run
        if run["status"] not in FINISHED_STATUSES:
            run["status"] = "running"
        run["pause"] = None
        if ev.policy_applied in {"continue", "replan"}:
            run["versions"] = {
                "code": ev.code_version,
                "prompt": ev.prompt_version,
                "tool_schema": ev.tool_schema_version,
                "model": ev.model_version,
            }

    def _finished(self, ev: RunFinished) -> None:
        self.run.update(
            status=ev.status,
            result_json=ev.result_json,
            error=ev.error,
            finished_at=ev.occurred_at,
            pause=None,
        )

    def _intended(self, ev: EffectIntended) -> None:
        existing = self.effects.get(ev.idempotency_key)
        if existing is not None and existing["state"] in _RESOLVED_STATES:
            return
        effect = _new_effect(ev.idempotency_key, ev.step, ev.ordinal, ev.effect)
        effect.update(
            provider=ev.provider,
            kind=ev.kind,
            identity_hash=ev.identity_hash,
            payload_hash=ev.payload_hash,
            request_json=ev.request_json,
            intended_at=existing["intended_at"] if existing else ev.occurred_at,
        )
        self.effects[ev.idempotency_key] = effect

    def _effect_of(self, key: str, step: int, name: str) -> dict[str, Any]:
        effect = self.effects.get(key)
        if effect is None:
            effect = self.effects[key] = _new_effect(key, step, -1, name)
        return effect

    def _recorded(self, ev: EffectRecorded) -> None:
        effect = self._effect_of(ev.idempotency_key, ev.step, ev.effect)
        effect.update(
            state=ev.outcome,
            external_ref=ev.external_ref,
            response_hash=ev.response_hash,
            error=ev.error,
            resolved_at=ev.occurred_at,
        )
        budget = self.run["budget"]
        budget["tokens"] += ev.tokens
        budget["usd"] += ev.usd

    def _reconciled(self, ev: EffectReconciled) -> None:
        effect = self._effect_of(ev.idempotency_key, ev.step, ev.effect)
        effect["state"] = _FINDING_STATE[ev.finding]
        effect["detail"] = ev.detail
        if ev.finding == "LANDED":
            effect["external_ref"] = ev.external_ref
            effect["response_hash"] = ev.response_hash
        effect["resolved_at"] = ev.occurred_at

    def _compensated(self, ev: EffectCompensated) -> None:
        effect = self._effect_of(ev.idempotency_key, ev.step, ev.effect)
        effect["compensation_key"] = ev.compensation_key
        effect["compensation_ref"] = ev.external_ref
        effect["detail"] = ev.detail
        if ev.outcome == "succeeded":
            effect["state"] = "compensated"

    # --- what is stored -------------------------------------------------------------------

    def model(self) -> RunView:
        """The view this run's plain state stands for (its model, once it fell back)."""
        if self.view is not None:
            return self.view
        values = dict(self.run)
        values["steps"] = self.steps
        values["effects"] = self.effects
        return RunView.model_validate(values)

    def status(self) -> str:
        """The run's status."""
        return self.run["status"] if self.view is None else self.view.status

    def stored(
        self, parked: int, dropped_from: int = 0
    ) -> tuple[dict[str, bytes], dict[str, bytes], dict[str, bytes]]:
        """The run's three hashes as :mod:`~agentledger.views.layout` stores its view, with
        ``parked`` events waiting (and dropped from a seq): run fields, steps, effects."""
        if self.view is None:
            try:
                return (
                    encode_run_values(self.run, parked, dropped_from),
                    {str(i): _encoded(s, _STEP_FIELDS) for i, s in self.steps.items()},
                    {k: _encoded_effect(e) for k, e in self.effects.items()},
                )
            except (plain_json.Unusual, UnicodeEncodeError, PydanticSerializationError):
                pass  # the model's encoders decide, as they would for the live projector
        view = self.model()
        return (
            encode_run(view, parked, dropped_from),
            {str(i): encode_step(s) for i, s in view.steps.items()},
            {k: encode_effect(e) for k, e in view.effects.items()},
        )

    def index_facts(self) -> tuple[str, int, int | None, dict[str, int]]:
        """(status, updated_at, finished_at, open intents by key with their intended_at): what
        the indexes and retention need of the run (``applier.index_update`` of a cold run)."""
        if self.view is not None:
            v = self.view
            opened = {
                k: e.intended_at for k, e in v.effects.items() if e.state in OPEN_EFFECT_STATES
            }
            return v.status, v.updated_at, v.finished_at, opened
        run = self.run
        opened = {
            k: e["intended_at"] for k, e in self.effects.items() if e["state"] in OPEN_EFFECT_STATES
        }
        return run["status"], run["updated_at"], run["finished_at"], opened


def _new_step(index: int, name: str) -> dict[str, Any]:
    step = dict(_STEP_FIELDS)
    step.update(step=index, name=name, activities={}, checks=[])
    return step


def _new_effect(key: str, step: int, ordinal: int, name: str) -> dict[str, Any]:
    effect = dict(_EFFECT_FIELDS)
    effect.update(
        idempotency_key=key,
        step=step,
        ordinal=ordinal,
        effect=name,
        provider="",
        kind="",
        identity_hash="",
        payload_hash="",
    )
    return effect


def _trimmed(values: dict[str, Any], fields: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """``values`` without the fields at their defaults, in field order: what
    ``model_dump(exclude_defaults=True)`` keeps (a required field always stays)."""
    out: dict[str, Any] = {}
    for name, default in fields:
        value = values[name]
        if default is _MISSING or value != default:
            out[name] = value
    return out


def _encoded(values: dict[str, Any], fields: tuple[tuple[str, Any], ...]) -> bytes:
    """A step's or an effect's stored value: its non-default fields (nested activities and
    checks alike) as pydantic-core writes them, packed as :func:`~.layout.encode_step` packs."""
    out = _trimmed(values, fields)
    activities = out.get("activities")
    if activities:
        out["activities"] = {k: _trimmed(a, _ACTIVITY_FIELDS) for k, a in activities.items()}
    checks = out.get("checks")
    if checks:
        out["checks"] = [_trimmed(c, _CHECK_FIELDS) for c in checks]
    if out.get("graph") is not None:  # only the model fold makes LangGraph steps
        raise plain_json.Unusual
    return pack(pydantic_core.to_json(out, inf_nan_mode="null"))


def _encoded_effect(values: dict[str, Any]) -> bytes:
    """An effect's stored value, led by its place as :func:`~.layout.encode_effect` leads it."""
    return placed(
        values["step"], values["ordinal"], values["state"], _encoded(values, _EFFECT_FIELDS)
    )


_HANDLERS: dict[type[RunEvent], Any] = {
    RunStarted: PlainRun._started,
    PlanRevised: PlainRun._plan_revised,
    StepStarted: PlainRun._step_started,
    ActivityRecorded: PlainRun._activity,
    StepCheckpointed: PlainRun._checkpointed,
    StepRejected: PlainRun._rejected,
    AcceptanceEvaluated: PlainRun._acceptance,
    RunPaused: PlainRun._paused,
    ApprovalDecided: PlainRun._approval,
    RunResumed: PlainRun._resumed,
    RunFinished: PlainRun._finished,
    EffectIntended: PlainRun._intended,
    EffectRecorded: PlainRun._recorded,
    EffectReconciled: PlainRun._reconciled,
    EffectCompensated: PlainRun._compensated,
}
