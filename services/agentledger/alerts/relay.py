"""Feeds the sinks from the topics: every alert event once per sink; dead letters become alerts.

The relay reads the alerts topic (alerts of every service: reconciler, projector, workers) and
hands each event to every sink that has not handled it yet (by event id, remembered in the
delivery ledger), so a restart that re-reads the topic delivers nothing twice. Records on the
dead-letter topic raise one collapsed ``deadletter.record`` alert per source topic.
"""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from agentledger.alerts.book import AlertBook
from agentledger.alerts.codes import DEADLETTER_RECORD
from agentledger.alerts.delivery import DeliveryLedger
from agentledger.alerts.model import AlertCondition
from agentledger.alerts.sinks import AlertSink
from agentledger.bus.port import EventPublisher
from agentledger.events.models import Alert, DeadLettered, Event

_log = structlog.get_logger(__name__)


def deadletter_condition(record: DeadLettered) -> AlertCondition:
    """The condition a dead-lettered record reports: poison on its source topic."""
    return AlertCondition(
        code=DEADLETTER_RECORD.code,
        scope=record.source_topic,
        summary=f"records from {record.source_topic} were dead-lettered: {record.reason}",
        detail={
            "reason": record.reason,
            "source_topic": record.source_topic,
            "source_partition": record.source_partition,
            "source_offset": record.source_offset,
        },
    )


class AlertRelay:
    """Delivers alert events to ``sinks`` exactly once each; turns dead letters into alerts."""

    def __init__(
        self,
        sinks: Sequence[AlertSink],
        ledger: DeliveryLedger,
        *,
        book: AlertBook | None = None,
        publisher: EventPublisher | None = None,
    ) -> None:
        self._sinks = list(sinks)
        self._ledger = ledger
        self._book = book
        self._publisher = publisher
        self.delivered = 0
        self.dead_lettered = 0

    async def handle(self, event: Event) -> None:
        """Process one record of the alerts or dead-letter topic (others are ignored)."""
        if isinstance(event, Alert):
            await self._deliver(event)
        elif isinstance(event, DeadLettered) and self._book is not None:
            opened = await self._book.observe([deadletter_condition(event)])
            if opened and self._publisher is not None:
                await self._book.publish(self._publisher, opened)

    async def _deliver(self, alert: Alert) -> None:
        for sink in self._sinks:
            if await self._ledger.handled(sink.name, alert.event_id):
                continue
            if await sink.deliver(alert):
                self.delivered += 1
            else:
                self.dead_lettered += 1
            await self._ledger.mark(sink.name, alert.event_id)
