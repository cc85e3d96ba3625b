"""Feeds the sinks from the topics: every alert event once per sink; dead letters become alerts.

The relay reads the alerts topic (alerts of every service: reconciler, projector, workers) and
hands each event to every sink that has not handled it (the delivery ledger claims it first, so
two relays, or a restart that re-reads the topic, deliver nothing twice). Records on the
dead-letter topic raise one collapsed ``deadletter.record`` alert per source topic.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Sequence
from typing import Protocol

import structlog

from agentledger.alerts.book import AlertBook
from agentledger.alerts.codes import DEADLETTER_RECORD, canonical
from agentledger.alerts.delivery import DeliveryLedger
from agentledger.alerts.model import AlertCondition
from agentledger.alerts.sinks import AlertSink
from agentledger.bus.port import EventPublisher
from agentledger.errors import DecodeError
from agentledger.events.models import Alert, DeadLettered, Event

_log = structlog.get_logger(__name__)
#: How long a relay may take to deliver one event before another relay may try it.
CLAIM_TTL_S = 600
#: The delivery-ledger name under which an alert event counts as taken into the alert store.
ADOPTED = "alert-store"


class Record(Protocol):
    """What the relay needs of a consumed record (``bus.consumer.Consumed`` has it)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def event(self) -> Event | None: ...

    @property
    def error(self) -> DecodeError | None: ...


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
        claim_ttl_s: int = CLAIM_TTL_S,
    ) -> None:
        self._sinks = list(sinks)
        self._ledger = ledger
        self._book = book
        self._publisher = publisher
        self._claim_ttl_s = claim_ttl_s
        self.delivered = 0
        self.dead_lettered = 0

    async def handle(self, event: Event) -> None:
        """Process one event of the alerts or dead-letter topic (others are ignored)."""
        if isinstance(event, Alert):
            alert = canonical(event)  # an old spelling goes out as today's code
            await self._adopt(alert)
            await self._deliver(alert)
        elif isinstance(event, DeadLettered) and self._book is not None:
            # Counted once per record even when the topic is read again (``--once`` runs).
            if not await self._ledger.claim(
                DEADLETTER_RECORD.code, event.event_id, self._claim_ttl_s
            ):
                return
            opened = await self._book.observe([deadletter_condition(event)])
            if opened and self._publisher is not None:
                await self._book.publish(self._publisher, opened)
            await self._ledger.mark(DEADLETTER_RECORD.code, event.event_id)

    async def handle_record(self, record: Record) -> None:
        """Process one consumed record; an undecodable one is dead-lettered, never dropped."""
        if record.event is not None:
            await self.handle(record.event)
            return
        reason = str(record.error) if record.error else "no event and no error"
        _log.error("alert_record_undecodable", topic=record.topic, offset=record.offset)
        if self._publisher is not None and not record.topic.endswith("deadletter"):
            await self._publisher.publish(
                [
                    DeadLettered(
                        reason=reason,
                        source_topic=record.topic,
                        source_partition=record.partition,
                        source_offset=record.offset,
                        key=record.key,
                        value=record.value,
                    )
                ]
            )

    async def consume(
        self, records: AsyncIterable[Record], *, commit: Committer | None = None
    ) -> int:
        """Handle every record of ``records`` (until it ends or is cancelled); how many."""
        count = 0
        async for record in records:
            await self.handle_record(record)
            count += 1
            if commit is not None:
                await commit.commit()
        return count

    async def _adopt(self, alert: Alert) -> None:
        """Bring an alert another service published into the alert store (once per event), so
        ``alerts list`` and the reconciler's clearing see what ``alerts tail`` shows."""
        if self._book is None:
            return
        if await self._book.store.key_of(alert.alert_id) is None or alert.state == "closed":
            if not await self._ledger.claim(ADOPTED, alert.event_id, self._claim_ttl_s):
                return
            await self._book.store.adopt(alert)
            await self._ledger.mark(ADOPTED, alert.event_id)

    async def _deliver(self, alert: Alert) -> None:
        for sink in self._sinks:
            if not await self._ledger.claim(sink.name, alert.event_id, self._claim_ttl_s):
                continue
            if await sink.deliver(alert):
                self.delivered += 1
            else:
                self.dead_lettered += 1
            await self._ledger.mark(sink.name, alert.event_id)


class Committer(Protocol):
    """A consumer whose position can be committed (``KafkaEventConsumer``)."""

    async def commit(self) -> None:
        """Commit the position after every record handled so far."""
