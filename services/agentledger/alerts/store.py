"""The alert-store port: collapsed alert state per condition, updated atomically.

Every operation is a pure transition (below) applied by :meth:`AlertStore.update`, which each
backend implements atomically (a dict for tests, WATCH/MULTI in Redis), so two reconciler
instances that see the same condition open one alert between them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from typing import TypeVar

from agentledger.alerts.model import AlertRecord
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
