"""The alert-store port: collapsed alert state per condition, updated atomically.

Every operation is a pure transition (below) applied by :meth:`AlertStore.update`, which each
backend implements atomically (a dict for tests, WATCH/MULTI in Redis), so two reconciler
instances that see the same condition open one alert between them.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from typing import TypeVar

from agentledger.alerts.model import AlertRecord, condition_key
from agentledger.events.models import Alert

T = TypeVar("T")
Transition = Callable[[AlertRecord | None], tuple[AlertRecord | None, T]]


def observe_transition(candidate: AlertRecord, now: int) -> Transition[tuple[AlertRecord, bool]]:
    """Open ``candidate`` if its condition has no record; else count one more sighting."""

    def step(existing: AlertRecord | None) -> tuple[AlertRecord | None, tuple[AlertRecord, bool]]:
        if existing is None:
            return candidate, (candidate, True)
        seen = existing.model_copy(update={"count": existing.count + 1, "last_seen_at": now})
        return seen, (seen, False)

    return step


def close_transition(reason: str, now: int) -> Transition[Alert | None]:
    """Close an open alert (adding its closed event); an acked one closes silently."""

    def step(existing: AlertRecord | None) -> tuple[AlertRecord | None, Alert | None]:
        if existing is None or existing.state == "closed":
            return existing, None
        closed = existing.model_copy(
            update={"state": "closed", "closed_reason": reason, "updated_at": now}
        )
        if existing.state == "acked":
            return (closed if closed.outbox else None), None
        event = closed.event("closed", now, closed_because=reason)
        closed.outbox = [*closed.outbox, event]
        return closed, event

    return step


def ack_transition(by: str, now: int) -> Transition[Alert | None]:
    """A person has seen an open alert: close it now; it stays muted while its condition lasts."""

    def step(existing: AlertRecord | None) -> tuple[AlertRecord | None, Alert | None]:
        if existing is None or existing.state != "open":
            return existing, None
        acked = existing.model_copy(update={"state": "acked", "acked_by": by, "updated_at": now})
        event = acked.event("closed", now, acked_by=by)
        acked.outbox = [*acked.outbox, event]
        return acked, event

    return step


def adopt_transition(alert: Alert, key: str) -> Transition[bool]:
    """Take in an alert event another service published (a worker, the projector, the fleet).

    An open event opens a record carrying the event's own alert id (nothing to publish: the
    event is on the topic already) or counts one more sighting; a closed event forgets the
    open record of that alert id (an acked one stays muted). True when the record changed.
    """

    def step(existing: AlertRecord | None) -> tuple[AlertRecord | None, bool]:
        if alert.state == "closed":
            detail = json.loads(alert.detail_json) if alert.detail_json else None
            acked = isinstance(detail, dict) and "acked_by" in detail
            if existing is None or existing.alert_id != alert.alert_id or acked:
                return existing, False  # an ack's own event: the record stays muted
            if existing.state == "closed":
                return existing, False
            why = detail.get("closed_because", "") if isinstance(detail, dict) else ""
            closed = existing.model_copy(
                update={
                    "state": "closed",
                    "closed_reason": str(why),
                    "updated_at": alert.occurred_at,
                }
            )
            return (closed if closed.outbox else None), True
        if existing is None:
            return adopted_record(alert, key), True
        if existing.state == "closed":
            return existing, False
        seen = existing.model_copy(
            update={"count": existing.count + 1, "last_seen_at": alert.occurred_at}
        )
        return seen, True

    return step


def adopted_record(alert: Alert, key: str) -> AlertRecord:
    """The open record of an alert event published without a record (no outbox)."""
    return AlertRecord(
        key=key,
        alert_id=alert.alert_id,
        code=alert.code,
        severity=alert.severity,
        source=alert.source or "unknown",
        summary=alert.summary,
        action=alert.action,
        run_id=alert.run_id,
        step=alert.step,
        effect=alert.effect,
        idempotency_key=alert.idempotency_key,
        worker_id=alert.worker_id,
        detail_json=alert.detail_json if alert.detail_json != "null" else "{}",
        count=alert.count,
        opened_at=alert.occurred_at,
        last_seen_at=alert.occurred_at,
        updated_at=alert.occurred_at,
    )


def published_transition(event_ids: Collection[str]) -> Transition[None]:
    """Drop published events from the outbox; forget a closed record with nothing left to send."""

    def step(existing: AlertRecord | None) -> tuple[AlertRecord | None, None]:
        if existing is None:
            return None, None
        rest = [e for e in existing.outbox if e.event_id not in event_ids]
        if existing.state == "closed" and not rest:
            return None, None
        return existing.model_copy(update={"outbox": rest}), None

    return step


def act_transition(now: int, due: Callable[[AlertRecord], bool]) -> Transition[bool]:
    """Stamp ``acted_at`` if ``due(record)``; True when the caller should act (exactly one does)."""

    def step(existing: AlertRecord | None) -> tuple[AlertRecord | None, bool]:
        if existing is None or not due(existing):
            return existing, False
        return existing.model_copy(update={"acted_at": now}), True

    return step


def adopted_key(alert: Alert) -> str:
    """The condition key of an alert event a service published on its own.

    About a run, it is the key the reconciler and ``effects resolve`` use for the same finding
    (code, run, idempotency key: never the writer), so they close it; otherwise the alert id.
    """
    if alert.run_id is not None:
        return condition_key(alert.code, run_id=alert.run_id, idempotency_key=alert.idempotency_key)
    return condition_key(alert.code, scope=alert.alert_id)


class AlertStore(ABC):
    """Collapsed alert records keyed by condition key, with an index by alert id."""

    @abstractmethod
    async def update(self, key: str, transition: Transition[T]) -> T:
        """Apply ``transition`` to the record of ``key`` atomically (None = no record)."""

    @abstractmethod
    async def get(self, key: str) -> AlertRecord | None:
        """The record of a condition, or None."""

    @abstractmethod
    async def key_of(self, alert_id: str) -> str | None:
        """The condition key of an alert id, while its record exists."""

    @abstractmethod
    async def records(self) -> list[AlertRecord]:
        """Every record not yet forgotten (open, acked, or closed with events to publish)."""

    async def observe(self, candidate: AlertRecord, now: int) -> tuple[AlertRecord, bool]:
        """Record a sighting; True when it opened a new alert (its event is in the outbox)."""
        return await self.update(candidate.key, observe_transition(candidate, now))

    async def close(self, key: str, reason: str, now: int) -> Alert | None:
        """Close the condition's alert; the closed event to publish, if one is due."""
        return await self.update(key, close_transition(reason, now))

    async def ack(self, alert_id: str, by: str, now: int) -> Alert | None:
        """Acknowledge an open alert by id; the closed event to publish, or None."""
        key = await self.key_of(alert_id)
        if key is None:
            return None
        return await self.update(key, ack_transition(by, now))

    async def adopt(self, alert: Alert) -> bool:
        """Take in an alert event published without a record; True when a record changed."""
        return await self.update(adopted_key(alert), adopt_transition(alert, adopted_key(alert)))

    async def published(self, key: str, event_ids: Collection[str]) -> None:
        """Confirm that events of ``key``'s outbox are on the alerts topic."""
        await self.update(key, published_transition(set(event_ids)))

    async def act_if(self, key: str, now: int, due: Callable[[AlertRecord], bool]) -> bool:
        """Claim the next action about a condition when ``due``; True for exactly one caller."""
        return await self.update(key, act_transition(now, due))

    async def active(self) -> list[AlertRecord]:
        """Open and acked alerts, oldest first."""
        found = [r for r in await self.records() if r.state != "closed"]
        return sorted(found, key=lambda r: (r.opened_at, r.key))


class MemoryAlertStore(AlertStore):
    """Records in a dict: the same transitions as Redis, for unit tests."""

    def __init__(self) -> None:
        self._records: dict[str, AlertRecord] = {}

    async def update(self, key: str, transition: Transition[T]) -> T:
        """Apply the transition (atomic: there is no await in between)."""
        new, result = transition(self._records.get(key))
        if new is None:
            self._records.pop(key, None)
        else:
            self._records[key] = new
        return result

    async def get(self, key: str) -> AlertRecord | None:
        """The record, or None."""
        return self._records.get(key)

    async def key_of(self, alert_id: str) -> str | None:
        """The key whose record carries ``alert_id``."""
        for key, record in self._records.items():
            if record.alert_id == alert_id:
                return key
        return None

    async def records(self) -> list[AlertRecord]:
        """Every record."""
        return list(self._records.values())
