"""Alert conditions (what was found) and records (one open alert per condition, with a count)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentledger.alerts.codes import ALERT_CODES
from agentledger.events.models import Alert, Severity, new_event_id

AlertState = Literal["open", "acked", "closed"]


@dataclass(frozen=True)
class AlertCondition:
    """A finding about one subject; two findings with the same ``key`` are the same condition.

    ``scope`` distinguishes conditions that have no run (e.g. the source topic of dead letters).
    """

    code: str
    summary: str
    run_id: str | None = None
    step: int | None = None
    effect: str | None = None
    idempotency_key: str | None = None
    worker_id: str | None = None
    scope: str | None = None
    detail: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    severity: Severity | None = None

    def __post_init__(self) -> None:
        if self.code not in ALERT_CODES:
            msg = f"unknown alert code {self.code!r}; add it to agentledger.alerts.codes"
            raise ValueError(msg)

    @property
    def key(self) -> str:
        """The condition's identity: code and subject, never the changing details."""
        return condition_key(
            self.code,
            run_id=self.run_id,
            idempotency_key=self.idempotency_key,
            worker_id=self.worker_id,
            scope=self.scope,
        )


def condition_key(
    code: str,
    *,
    run_id: str | None = None,
    idempotency_key: str | None = None,
    worker_id: str | None = None,
    scope: str | None = None,
) -> str:
    """The key of the condition ``code`` about this subject (see :attr:`AlertCondition.key`)."""
    parts = (code, run_id, idempotency_key, worker_id, scope)
    return "|".join("" if p is None else p for p in parts)


class AlertRecord(BaseModel):
    """The collapsed state of one condition: its alert id, how often it was seen, its events.

    ``outbox`` holds alert events written to the record but not yet confirmed published; a
    closed record is forgotten once its outbox is empty.
    """

    model_config = ConfigDict(extra="forbid")

    key: str
    alert_id: str
    code: str
    severity: Severity
    source: str
    summary: str
    action: str
    run_id: str | None = None
    step: int | None = None
    effect: str | None = None
    idempotency_key: str | None = None
    worker_id: str | None = None
    scope: str | None = None
    detail_json: str = "{}"
    state: AlertState = "open"
    count: int = 1
    opened_at: int
    last_seen_at: int
    updated_at: int
    acted_at: int = 0
    acked_by: str | None = None
    closed_reason: str = ""
    outbox: list[Alert] = Field(default_factory=list)

    def event(self, state: Literal["open", "closed"], at: int, **detail: Any) -> Alert:
        """An Alert event for this record, in ``state``, with ``detail`` merged in."""
        merged = {**json.loads(self.detail_json), **detail}
        return Alert(
            event_id=new_event_id(),
            occurred_at=at,
            alert_id=self.alert_id,
            code=self.code,
            severity=self.severity,
            state=state,
            source=self.source,
            run_id=self.run_id,
            step=self.step,
            effect=self.effect,
            idempotency_key=self.idempotency_key,
            worker_id=self.worker_id,
            summary=self.summary,
            action=self.action,
            detail_json=json.dumps(merged, sort_keys=True, default=str),
            count=self.count,
        )


def new_record(condition: AlertCondition, *, source: str, now: int) -> AlertRecord:
    """A fresh open record for ``condition`` with its opening event in the outbox."""
    code = ALERT_CODES[condition.code]
    record = AlertRecord(
        key=condition.key,
        alert_id=f"alr_{uuid.uuid4().hex}",
        code=condition.code,
        severity=condition.severity or code.severity,
        source=source,
        summary=condition.summary,
        action=code.action,
        run_id=condition.run_id,
        step=condition.step,
        effect=condition.effect,
        idempotency_key=condition.idempotency_key,
        worker_id=condition.worker_id,
        scope=condition.scope,
        detail_json=json.dumps(condition.detail, sort_keys=True, default=str),
        opened_at=now,
        last_seen_at=now,
        updated_at=now,
    )
    record.outbox.append(record.event("open", now))
    return record


def run_alert_id(code: str, run_id: str, key: str | None) -> str:
    """The alert id a worker gives its alert ``code`` about a run (and an effect's key).

    Never change it: the closed event that ends such an alert (a resumed worker settling the
    effect, ``effects resolve``) names the same id.
    """
    return f"{code}:{run_id}:{key or ''}"


def closing_alert(
    code: str,
    *,
    run_id: str,
    key: str | None,
    reason: str,
    source: str,
    at: int,
    step: int | None = None,
    effect: str | None = None,
    worker_id: str | None = None,
) -> Alert:
    """The closed event of a worker's alert about a run, with why it closed."""
    registered = ALERT_CODES[code]
    return Alert(
        alert_id=run_alert_id(code, run_id, key),
        code=code,
        severity=registered.severity,
        state="closed",
        source=source,
        run_id=run_id,
        step=step,
        effect=effect,
        idempotency_key=key,
        worker_id=worker_id,
        summary=f"run {run_id}: {registered.title}: closed ({reason})",
        action=registered.action,
        detail_json=json.dumps({"closed_because": reason}, sort_keys=True),
        occurred_at=at,
    )
