"""The resume view of one run: what a resumed writer needs, derived only from events."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field

from agentledger.views.graph_model import GraphCheckpoint
from agentledger.views.records import Records

StepStatus = Literal["started", "checkpointed", "rejected"]
EffectState = Literal[
    "intended", "succeeded", "failed", "unknown", "landed", "not_landed", "compensated"
]
#: An effect state's code in the place leading a stored effect value: its position here, the
#: order of the EffectState literal. Never reorder or remove a state there (values written with
#: these codes must read; tests/unit/test_view_records.py pins them); add new ones at the end.
PLACE_STATES: tuple[str, ...] = get_args(EffectState)
#: A place kept as one int (views/layout.py reads it so from the lead of a stored value):
#: ``(step << 32 | ordinal) << PLACE_SHIFT | state code``, for a step of 0 or more and an
#: ordinal in [0, 2**32); ``packed >> PLACE_SHIFT`` is the session's effect index key.
PLACE_SHIFT = 3
_CODE_MASK = (1 << PLACE_SHIFT) - 1
_ORDINAL_MASK = (1 << 32) - 1
#: Effect states that still need someone to find out (or finish) what happened.
OPEN_EFFECT_STATES: frozenset[str] = frozenset({"intended", "unknown"})
_OPEN = OPEN_EFFECT_STATES
#: Effect states in which the provider is known to have performed the effect.
PERFORMED_STATES: frozenset[str] = frozenset({"succeeded", "landed", "compensated"})


class Versions(BaseModel):
    """The versions a run was started (or last knowingly resumed) under."""

    code: str = ""
    prompt: str = ""
    tool_schema: str = ""
    model: str = ""


class Budget(BaseModel):
    """Limits (None = unlimited) and what every attempt, crashed ones included, spent."""

    max_tokens: int | None = None
    max_usd: float | None = None
    max_steps: int | None = None
    max_consecutive_errors: int | None = None
    deadline_at: int | None = None
    tokens: int = 0
    usd: float = 0.0
    steps: int = 0
    consecutive_errors: int = 0


class Pause(BaseModel):
    """Why a run waits, for whom, and until when."""

    reason: str
    step: int | None = None
    payload_json: str = "null"
    intent_hash: str | None = None
    expires_at: int | None = None
    paused_at: int = 0


class Approval(BaseModel):
    """A recorded human decision, bound to generation, intent hash and expiry."""

    approval_id: str
    decision: str
    approver: str = ""
    generation: int = 0
    intent_hash: str | None = None
    expires_at: int | None = None
    decided_at: int = 0
    note: str = ""


class ActivityView(BaseModel):
    """A recorded activity result of the current attempt of a step."""

    ordinal: int
    name: str
    kind: str
    result_json: str = "null"
    result_ref_uri: str | None = None
    result_ref_hash: str | None = None
    source_uri: str | None = None
    content_hash: str | None = None
    read_at: int | None = None
    tokens: int = 0
    usd: float = 0.0


class CheckView(BaseModel):
    """One acceptance check of the current attempt."""

    check: str
    passed: bool
    detail: str = ""


class StepView(BaseModel):
    """One step: its latest attempt, its result once checkpointed."""

    step: int
    name: str
    status: StepStatus = "started"
    attempt: int = 1
    attempts: int = 0
    result_json: str = "null"
    result_ref_uri: str | None = None
    result_ref_hash: str | None = None
    last_reason: str = ""
    inherited: bool = False
    activities: dict[int, ActivityView] = Field(default_factory=dict)
    checks: list[CheckView] = Field(default_factory=list)
    graph: GraphCheckpoint | None = None  # set when the step is a LangGraph checkpoint


class EffectView(BaseModel):
    """One effect, keyed by its idempotency key, with everything the reconciler needs."""

    idempotency_key: str
    step: int
    ordinal: int
    effect: str
    provider: str
    kind: str
    identity_hash: str
    payload_hash: str
    request_json: str = "null"
    state: EffectState = "intended"
    external_ref: str | None = None
    response_hash: str | None = None
    error: str | None = None
    detail: str = ""
    intended_at: int = 0
    resolved_at: int | None = None
    compensation_key: str | None = None
    compensation_ref: str | None = None
    inherited: bool = False


class EffectPlace(BaseModel):
    """Where an effect was asked for and whether it is open: what a resume needs of every
    effect of the run, read from the stored effect without decoding the rest of it."""

    model_config = ConfigDict(extra="ignore")

    idempotency_key: str
    step: int
    ordinal: int
    state: EffectState = "intended"


class RunView(BaseModel):
    """Everything about one run that a resume needs; equal when rebuilt from the same events."""

    run_id: str
    status: str = "new"
    agent: str = ""
    input_json: str = "null"
    plan: list[str] = Field(default_factory=list)
    plan_version: int = 0
    cursor: int = 0
    applied_seq: int = 0
    fence: int = 0
    fence_since_seq: int = 0
    worker_id: str = ""
    generation: int = 0
    version_policy: str = "refuse"
    versions: Versions = Field(default_factory=Versions)
    budget: Budget = Field(default_factory=Budget)
    pause: Pause | None = None
    approvals: list[Approval] = Field(default_factory=list)
    parent_run_id: str | None = None
    forked_from_step: int | None = None
    result_json: str = "null"
    error: str | None = None
    started_at: int = 0
    updated_at: int = 0
    finished_at: int | None = None
    #: seq -> digest of the event applied there, for the last RECENT_DIGESTS seqs (fold.py)
    recent_digests: dict[int, str] = Field(default_factory=dict)
    #: Stored steps and effects are decoded when first read (views/records.py).
    steps: Records[int, StepView] = Field(default_factory=Records)
    effects: Records[str, EffectView] = Field(default_factory=Records)

    def placed_effects(self) -> list[tuple[str, int, int, str]]:
        """(idempotency key, step, ordinal, state) of every effect, read from the place that
        leads its stored value while it is still stored (views/records.py, views/layout.py):
        what a resume reads of every effect before it is ready, without a model per effect."""
        keys, briefs = self.effect_briefs()
        return [place_of_brief(key, found) for key, found in zip(keys, briefs, strict=True)]

    def effect_briefs(self) -> tuple[list[str], list[object]]:
        """Every effect's key and, in the same order, its brief: a place packed in one int
        (:data:`PLACE_SHIFT`), a (key, step, ordinal, state) tuple, or the effect's model once
        decoded. What a resume reads of every effect before it is ready, with no object per
        effect for the collector; the records' own lists (read them, never change them)."""
        return self.effects.listed_briefs()

    def open_effects(self) -> list[EffectView]:
        """Intents with no known outcome, in the order they were intended."""
        found = [self.effects[key] for key, state in self._effect_states() if state in _OPEN]
        return sorted(found, key=lambda e: (e.step, e.ordinal))

    def _effect_states(self) -> Iterator[tuple[str, str]]:
        """Each effect's key in the records with its state (from its place while stored)."""
        states = PLACE_STATES
        for key, found in self.effects.briefs():
            if type(found) is int:
                yield key, states[found & _CODE_MASK]
            elif type(found) is tuple:
                yield key, found[3]
            elif isinstance(found, EffectView | EffectPlace):
                yield key, found.state


def place_of_brief(key: str, found: object) -> tuple[str, int, int, str]:
    """The (idempotency key, step, ordinal, state) of an effect's brief (:meth:`RunView.
    effect_briefs`) kept under ``key``."""
    if type(found) is int:
        place = found >> PLACE_SHIFT
        return key, place >> 32, place & _ORDINAL_MASK, PLACE_STATES[found & _CODE_MASK]
    if type(found) is tuple:
        return found
    if isinstance(found, EffectView | EffectPlace):
        return found.idempotency_key, found.step, found.ordinal, found.state
    msg = f"an effect decoded as {type(found).__name__}"
    raise TypeError(msg)


_M = TypeVar("_M", bound=BaseModel)
_PLAIN_DEFAULTS = (str, int, float, bool, type(None))
_set = object.__setattr__


class _Maker:
    """How to build one view model from values that already have its field types exactly."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self.template: dict[str, Any] = {}
        self.factories: list[tuple[str, Callable[[], Any]]] = []
        required: set[str] = set()
        for name, f in model.model_fields.items():
            self.template[name] = None
            if f.default_factory is not None:
                self.factories.append((name, f.default_factory))  # type: ignore[arg-type]
            elif f.is_required():
                required.add(name)
            else:
                self.template[name] = f.default
        self.required = frozenset(required)


def _plain(model: type[BaseModel]) -> bool:
    """Whether validating values of the exact field types only stores them (no validators,
    constraints, aliases, extras or conversions of defaults)."""
    d = model.__pydantic_decorators__
    if d.validators or d.field_validators or d.root_validators or d.model_validators:
        return False
    if model.__pydantic_post_init__ or model.model_config.get("extra") == "allow":
        return False
    return all(
        not f.metadata
        and f.alias is None
        and not f.validate_default
        and (f.default_factory is not None or f.is_required() or type(f.default) in _PLAIN_DEFAULTS)
        for f in model.model_fields.values()
    )


_MAKERS: dict[type[BaseModel], _Maker] = {
    m: _Maker(m) for m in (StepView, ActivityView, CheckView, EffectView) if _plain(m)
}


def made(model: type[_M], values: dict[str, Any]) -> _M:
    """``model(**values)`` for values the fold took from validated events (each of its field's
    type exactly), without validating them a second time: the same instance, set fields and
    defaults (tests/unit/test_fold_fast.py compares with the reference fold)."""
    maker = _MAKERS.get(model)
    if maker is None or not maker.required <= values.keys():
        return model(**values)
    fields = maker.template.copy()
    for name, factory in maker.factories:
        fields[name] = factory()
    fields.update(values)
    obj = model.__new__(model)
    _set(obj, "__dict__", fields)
    _set(obj, "__pydantic_fields_set__", set(values))
    _set(obj, "__pydantic_extra__", None)
    _set(obj, "__pydantic_private__", None)
    return obj
