"""Pydantic models of every event; each mirrors one Avro record in ``schemas/<Name>.avsc``.

Run events share the envelope of DESIGN.md §3 (``event_id``, ``run_id``, ``seq``, ``fence``,
``worker_id``, ``occurred_at``). Times are epoch milliseconds; free-form payloads travel as JSON
text in ``*_json`` fields, redacted before they are built.
"""

from __future__ import annotations

import time
import uuid
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

RunStatus = Literal[
    "running", "paused", "succeeded", "failed", "rejected", "budget_exceeded", "cancelled"
]
FINISHED_STATUSES: frozenset[str] = frozenset(
    {"succeeded", "failed", "rejected", "budget_exceeded", "cancelled"}
)
EffectOutcome = Literal["succeeded", "failed", "unknown"]
Finding = Literal["LANDED", "NOT_LANDED", "UNKNOWN"]
Decision = Literal["approved", "rejected", "revoked"]
VersionPolicy = Literal["refuse", "continue", "replan"]
Severity = Literal["info", "warning", "critical"]
#: How a LangGraph channel value is stored in a CheckpointSaved blob.
BLOB_KINDS: tuple[str, ...] = ("full", "append", "empty")


def now_ms() -> int:
    """Wall-clock time in epoch milliseconds, the unit of every ``*_at`` field."""
    return time.time_ns() // 1_000_000


def new_event_id() -> str:
    """A fresh event id (random: it identifies one write, not one logical fact)."""
    return uuid.uuid4().hex


class Event(BaseModel):
    """Base of every record on the wire; subclasses name their topic role."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic_role: ClassVar[str]

    event_id: str = Field(default_factory=new_event_id)
    occurred_at: int = Field(default_factory=now_ms)


class RunEvent(Event):
    """An event in a run's gapless, fenced sequence (steps, effects and acceptance topics)."""

    run_id: str
    seq: int = Field(ge=1)
    fence: int = Field(ge=0)
    worker_id: str


class StepEvent(RunEvent):
    """Run lifecycle event on ``runs.steps``."""

    topic_role: ClassVar[str] = "steps"


class EffectEvent(RunEvent):
    """What left the building, on ``runs.effects``."""

    topic_role: ClassVar[str] = "effects"


# --- runs.steps ---------------------------------------------------------------------------


class RunStarted(StepEvent):
    """A run began with this plan, these versions and these budget limits."""

    agent: str
    plan: list[str]
    plan_version: int = 1
    input_json: str = "null"
    code_version: str = ""
    prompt_version: str = ""
    tool_schema_version: str = ""
    model_version: str = ""
    version_policy: VersionPolicy = "refuse"
    generation: int = 0
    max_tokens: int | None = None
    max_usd: float | None = None
    max_steps: int | None = None
    max_consecutive_errors: int | None = None
    deadline_at: int | None = None


class PlanRevised(StepEvent):
    """The plan changed; steps from ``from_step`` on follow the new plan."""

    plan: list[str]
    plan_version: int
    from_step: int = 0
    reason: str = ""


class StepStarted(StepEvent):
    """An attempt at a step began."""

    step: int = Field(ge=0)
    step_name: str
    attempt: int = Field(ge=1)


class ActivityRecorded(StepEvent):
    """A model call or read inside a step finished; its result is reused on resume."""

    step: int = Field(ge=0)
    attempt: int = Field(ge=1)
    ordinal: int = Field(ge=0)
    name: str
    kind: str = "model"
    result_json: str = "null"
    result_ref_uri: str | None = None
    result_ref_hash: str | None = None
    source_uri: str | None = None
    content_hash: str | None = None
    read_at: int | None = None
    tokens: int = 0
    usd: float = 0.0


class StepCheckpointed(StepEvent):
    """The step passed its acceptance check: the resume cursor moves past it."""

    step: int = Field(ge=0)
    step_name: str
    attempt: int = Field(ge=1)
    result_json: str = "null"
    result_ref_uri: str | None = None
    result_ref_hash: str | None = None


class StepRejected(StepEvent):
    """The step ran and failed its check (or errored); the cursor stays."""

    step: int = Field(ge=0)
    step_name: str
    attempt: int = Field(ge=1)
    reason: str
    result_json: str = "null"


class RunPaused(StepEvent):
    """The run waits for a human: what is asked, of whom, by when."""

    reason: str
    step: int | None = None
    payload_json: str = "null"
    intent_hash: str | None = None
    expires_at: int | None = None


class ApprovalDecided(StepEvent):
    """A human approved, rejected or revoked what a pause asked for."""

    approval_id: str
    decision: Decision
    approver: str = ""
    generation: int = 0
    intent_hash: str | None = None
    expires_at: int | None = None
    note: str = ""


class RunResumed(StepEvent):
    """A writer took the run over (new fence) and continues it under these versions."""

    previous_fence: int = 0
    reason: str = ""
    code_version: str = ""
    prompt_version: str = ""
    tool_schema_version: str = ""
    model_version: str = ""
    policy_applied: str = ""


class RunForked(StepEvent):
    """This run is a fork of another, from one of its checkpoints, in a new generation."""

    parent_run_id: str
    from_step: int = Field(ge=0)
    generation: int
    inherited_json: str = "null"


class RunFinished(StepEvent):
    """The run ended; ``status`` says how."""

    status: RunStatus
    result_json: str = "null"
    error: str | None = None


# --- runs.steps: LangGraph checkpoints (agentledger.integrations.langgraph) ----------------
# A LangGraph thread is a run; each checkpoint it saves is a step of that run. Channel values
# and pending writes are LangGraph-serialized (``serde.dumps_typed``: a type tag and bytes),
# redacted before the event is built, and travel as parallel arrays (one Avro record per file).


class CheckpointSaved(StepEvent):
    """A LangGraph checkpoint was saved as step ``step``; blobs are the channels it changed.

    Blob ``i`` is channel ``blob_channels[i]`` at version ``blob_versions[i]`` (versions are
    JSON text: LangGraph versions are int, float or str). Its kind is ``full`` (the value),
    ``append`` (the items appended to the channel's list at version ``blob_bases[i]``) or
    ``empty`` (the channel has no value at that version).
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64"
    )

    step: int = Field(ge=0)
    checkpoint_ns: str = ""
    checkpoint_id: str
    parent_checkpoint_id: str | None = None
    checkpoint_json: str
    metadata_json: str = "{}"
    blob_channels: list[str]
    blob_versions: list[str]
    blob_kinds: list[str]
    blob_bases: list[str]
    blob_types: list[str]
    blob_values: list[bytes]

    @model_validator(mode="after")
    def _blobs_aligned(self) -> CheckpointSaved:
        n = len(self.blob_channels)
        sizes = {
            len(self.blob_versions),
            len(self.blob_kinds),
            len(self.blob_bases),
            len(self.blob_types),
            len(self.blob_values),
        }
        if sizes != {n}:
            msg = "the blob_* arrays of a CheckpointSaved must all have the same length"
            raise ValueError(msg)
        bad = sorted(set(self.blob_kinds) - set(BLOB_KINDS))
        if bad:
            msg = f"blob kinds {bad} are not among {BLOB_KINDS}"
            raise ValueError(msg)
        return self


class WritesSaved(StepEvent):
    """A LangGraph task's pending writes against the checkpoint saved as step ``step``."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64"
    )

    step: int = Field(ge=0)
    checkpoint_ns: str = ""
    checkpoint_id: str
    task_id: str
    task_path: str = ""
    write_channels: list[str]
    write_indexes: list[int]
    write_types: list[str]
    write_values: list[bytes]

    @model_validator(mode="after")
    def _writes_aligned(self) -> WritesSaved:
        n = len(self.write_channels)
        if {len(self.write_indexes), len(self.write_types), len(self.write_values)} != {n}:
            msg = "the write_* arrays of a WritesSaved must all have the same length"
            raise ValueError(msg)
        return self


class CheckpointsDeleted(StepEvent):
    """LangGraph checkpoints (the steps listed) and their writes were deleted from the views.

    ``reason`` is ``delete_thread``, ``delete_for_runs`` or ``prune``. Channel values that a
    surviving checkpoint still needs stay; the log itself keeps every event until retention.
    """

    steps: list[int]
    reason: str


# --- runs.effects -------------------------------------------------------------------------


class EffectIntended(EffectEvent):
    """About to call a provider with this key; durable before the call."""

    step: int = Field(ge=0)
    ordinal: int = Field(ge=0)
    effect: str
    provider: str
    kind: str
    idempotency_key: str
    identity_hash: str
    payload_hash: str
    request_json: str = "null"
    request_ref_uri: str | None = None


class EffectRecorded(EffectEvent):
    """The provider answered (or timed out: outcome ``unknown``)."""

    step: int = Field(ge=0)
    effect: str
    idempotency_key: str
    outcome: EffectOutcome
    external_ref: str | None = None
    response_hash: str | None = None
    error: str | None = None
    tokens: int = 0
    usd: float = 0.0


class EffectReconciled(EffectEvent):
    """The provider was asked what became of an intent with no outcome."""

    step: int = Field(ge=0)
    effect: str
    idempotency_key: str
    finding: Finding
    external_ref: str | None = None
    response_hash: str | None = None
    detail: str = ""


class EffectCompensated(EffectEvent):
    """An effect was undone (refund, cancel) with its own idempotency key."""

    step: int = Field(ge=0)
    effect: str
    idempotency_key: str
    compensation_key: str
    outcome: EffectOutcome
    external_ref: str | None = None
    detail: str = ""


# --- runs.acceptance ----------------------------------------------------------------------


class AcceptanceEvaluated(RunEvent):
    """One acceptance check of one step attempt, passed or not."""

    topic_role: ClassVar[str] = "acceptance"

    step: int = Field(ge=0)
    attempt: int = Field(ge=1)
    check: str
    passed: bool
    detail: str = ""


# --- runs.requests ------------------------------------------------------------------------


class RunRequested(Event):
    """Somebody asked the fleet to start a run."""

    topic_role: ClassVar[str] = "requests"

    run_id: str
    agent: str
    input_json: str = "null"
    requested_by: str = ""


class ResumeRequested(Event):
    """Somebody (reconciler, approver, operator) asked the fleet to continue a run."""

    topic_role: ClassVar[str] = "requests"

    run_id: str
    reason: str = ""
    requested_by: str = ""


class RecordSkipped(Event):
    """An operator skipped one undecodable record of a run's log (by its position), so the run
    can be read and resumed without it. Written on the steps topic under the run's key."""

    topic_role: ClassVar[str] = "steps"

    run_id: str
    source_topic: str
    source_partition: int
    source_offset: int
    reason: str = ""
    skipped_by: str = ""


# --- alerts and dead letters --------------------------------------------------------------


class Alert(Event):
    """A finding a person should act on; ``code`` is stable, one open alert per condition."""

    topic_role: ClassVar[str] = "alerts"

    alert_id: str
    code: str
    severity: Severity
    state: Literal["open", "closed"] = "open"
    source: str = ""
    run_id: str | None = None
    step: int | None = None
    effect: str | None = None
    idempotency_key: str | None = None
    worker_id: str | None = None
    summary: str
    action: str = ""
    detail_json: str = "null"
    count: int = 1


class DeadLettered(Event):
    """A record nobody could use, kept with why and where it came from."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64"
    )
    topic_role: ClassVar[str] = "deadletter"

    reason: str
    source_topic: str
    source_partition: int
    source_offset: int
    key: bytes | None = None
    value: bytes | None = None


EVENT_TYPES: tuple[type[Event], ...] = (
    RunStarted,
    PlanRevised,
    StepStarted,
    ActivityRecorded,
    StepCheckpointed,
    StepRejected,
    RunPaused,
    ApprovalDecided,
    RunResumed,
    RunForked,
    RunFinished,
    CheckpointSaved,
    WritesSaved,
    CheckpointsDeleted,
    EffectIntended,
    EffectRecorded,
    EffectReconciled,
    EffectCompensated,
    AcceptanceEvaluated,
    RunRequested,
    ResumeRequested,
    Alert,
    DeadLettered,
    RecordSkipped,
)
EVENT_BY_NAME: dict[str, type[Event]] = {cls.__name__: cls for cls in EVENT_TYPES}
