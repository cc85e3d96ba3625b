"""Raising and clearing alerts: one open alert per condition, its events published once.

A service hands the book the conditions it found; the book opens an alert for a new condition
(returning the open event to publish, ideally in the same transaction as the service's own
events), counts repeats silently, and closes the alert when the service says the condition
cleared. Events stay in the record's outbox until :meth:`AlertBook.confirm`, so a crash between
Redis and Kafka leaves them to :meth:`AlertBook.flush`, never lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import structlog

from agentledger.alerts.model import AlertCondition, AlertRecord, new_record
from agentledger.alerts.store import AlertStore
from agentledger.bus.port import EventPublisher
from agentledger.events.models import Alert, now_ms

_log = structlog.get_logger(__name__)


class AlertBook:
    """Collapses conditions into alerts in ``store``; events are tagged with ``source``."""

    def __init__(
        self, store: AlertStore, *, source: str, clock: Callable[[], int] = now_ms
    ) -> None:
        self.store = store
        self.source = source
        self._clock = clock
        self._keys: dict[str, str] = {}

    async def observe(self, conditions: Iterable[AlertCondition]) -> list[Alert]:
        """Record sightings; the open events of the conditions that are new."""
        events: list[Alert] = []
        for condition in conditions:
            _, opened = await self.sight(condition)
            events.extend(opened)
        return events

    async def sight(self, condition: AlertCondition) -> tuple[AlertRecord, list[Alert]]:
        """Record one sighting: the condition's record, and its open event if it is new."""
        now = self._clock()
        record, opened = await self.store.observe(
            new_record(condition, source=self.source, now=now), now
        )
        if not opened:
            return record, []
        _log.warning(
            "alert_opened",
            code=record.code,
            alert_id=record.alert_id,
            run_id=record.run_id,
            summary=record.summary,
        )
        return record, self._track(record, record.outbox)

    async def close(self, reasons: Mapping[str, str]) -> list[Alert]:
        """Close the alerts of these condition keys (key -> why it cleared); events to publish."""
        events: list[Alert] = []
        for key, reason in reasons.items():
            event = await self.store.close(key, reason, self._clock())
            if event is not None:
                _log.info("alert_closed", code=event.code, alert_id=event.alert_id, reason=reason)
                self._keys[event.alert_id] = key
                events.append(event)
        return events

    async def ack(self, alert_id: str, by: str) -> Alert | None:
        """Acknowledge an open alert; the closed event to publish, or None if not open."""
        key = await self.store.key_of(alert_id)
        event = await self.store.ack(alert_id, by, self._clock())
        if event is not None and key is not None:
            self._keys[alert_id] = key
        return event

    async def confirm(self, events: Sequence[Alert]) -> None:
        """The events are on the alerts topic: take them out of their outboxes."""
        by_key: dict[str, list[str]] = {}
        for event in events:
            key = self._keys.pop(event.alert_id, None) or await self.store.key_of(event.alert_id)
            if key is not None:
                by_key.setdefault(key, []).append(event.event_id)
        for key, ids in by_key.items():
            await self.store.published(key, ids)

    async def publish(self, publisher: EventPublisher, events: Sequence[Alert]) -> None:
        """Publish alert events on their own, then confirm them."""
        if events:
            await publisher.publish(events)
            await self.confirm(events)

    async def flush(self, publisher: EventPublisher, *, older_than_ms: int) -> int:
        """Publish events left in outboxes for longer than ``older_than_ms``; how many."""
        cutoff = self._clock() - older_than_ms
        pending: list[Alert] = []
        for record in await self.store.records():
            if record.outbox and record.updated_at <= cutoff:
                pending.extend(self._track(record, record.outbox))
        await self.publish(publisher, pending)
        return len(pending)

    async def active(self) -> list[AlertRecord]:
        """Open and acked alerts, oldest first."""
        return await self.store.active()

    def _track(self, record: AlertRecord, events: Iterable[Alert]) -> list[Alert]:
        out = list(events)
        for event in out:
            self._keys[event.alert_id] = record.key
        return out
