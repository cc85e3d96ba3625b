"""Alert collapsing: the store contract (run against memory here, Redis in integration) and book."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from agentledger.alerts.book import AlertBook
from agentledger.alerts.model import AlertCondition, new_record
from agentledger.alerts.store import AlertStore, MemoryAlertStore
from agentledger.bus.port import EventPublisher
from agentledger.events.models import Alert, Event


def unknown(run: str = "r1", key: str = "k1", summary: str = "cannot tell") -> AlertCondition:
    """An effect.unknown condition about one intent."""
    return AlertCondition(code="effect.unknown", run_id=run, idempotency_key=key, summary=summary)


class Published(EventPublisher):
    """Collects what a book publishes."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def publish(self, events: Sequence[Event]) -> None:
        """Keep the events."""
        self.events.extend(events)


class AlertStoreContract:
    """Behaviour every AlertStore backend must have; subclasses provide the ``store`` fixture."""

    async def test_first_sighting_opens_and_repeats_count(self, store: AlertStore) -> None:
        """The first sighting opens an alert with its open event; repeats only raise the count."""
        first, opened = await store.observe(new_record(unknown(), source="t", now=1), 1)
        again, opened_again = await store.observe(new_record(unknown(), source="t", now=2), 2)
        assert opened
        assert not opened_again
        assert again.alert_id == first.alert_id
        assert again.count == 2
        assert again.last_seen_at == 2
        assert [e.state for e in again.outbox] == ["open"]

    async def test_concurrent_sightings_open_one_alert(self, store: AlertStore) -> None:
        """Twenty concurrent sightings of one condition open exactly one alert counted twenty."""
        results = await asyncio.gather(
            *(store.observe(new_record(unknown(), source="t", now=n), n) for n in range(20))
        )
        assert sum(1 for _, opened in results if opened) == 1
        record = await store.get(unknown().key)
        assert record is not None
        assert record.count == 20

    async def test_close_emits_closed_event_then_forgets(self, store: AlertStore) -> None:
        """Closing adds a closed event with the count; once both events are published it is gone."""
        record, _ = await store.observe(new_record(unknown(), source="t", now=1), 1)
        await store.observe(new_record(unknown(), source="t", now=2), 2)
        closed = await store.close(record.key, "landed", 3)
        assert closed is not None
        assert closed.state == "closed"
        assert closed.count == 2
        assert closed.alert_id == record.alert_id
        assert await store.close(record.key, "landed", 4) is None
        current = await store.get(record.key)
        assert current is not None
        await store.published(record.key, [e.event_id for e in current.outbox])
        assert await store.get(record.key) is None
        assert await store.key_of(record.alert_id) is None

    async def test_close_without_record_is_noop(self, store: AlertStore) -> None:
        """Closing a condition that never opened emits nothing."""
        assert await store.close(unknown().key, "nothing", 1) is None
        assert await store.records() == []

    async def test_ack_closes_and_mutes_until_cleared(self, store: AlertStore) -> None:
        """An ack closes the alert at once; sightings stay muted; clearing then forgets silently."""
        record, _ = await store.observe(new_record(unknown(), source="t", now=1), 1)
        acked = await store.ack(record.alert_id, "oncall", 2)
        assert acked is not None
        assert acked.state == "closed"
        assert '"acked_by": "oncall"' in acked.detail_json
        assert await store.ack(record.alert_id, "oncall", 3) is None
        _, opened = await store.observe(new_record(unknown(), source="t", now=4), 4)
        assert not opened
        current = await store.get(record.key)
        assert current is not None
        await store.published(record.key, [e.event_id for e in current.outbox])
        assert await store.close(record.key, "landed", 5) is None
        assert await store.get(record.key) is None

    async def test_act_if_claims_for_one_caller(self, store: AlertStore) -> None:
        """Of concurrent callers of act_if on one due record, exactly one gets True."""
        record, _ = await store.observe(new_record(unknown(), source="t", now=1), 1)
        claims = await asyncio.gather(
            *(store.act_if(record.key, 10, lambda r: r.acted_at == 0) for _ in range(10))
        )
        assert claims.count(True) == 1
        current = await store.get(record.key)
        assert current is not None
        assert current.acted_at == 10

    async def test_active_lists_open_and_acked(self, store: AlertStore) -> None:
        """Active alerts are the open and acked ones, indexed by alert id."""
        a, _ = await store.observe(new_record(unknown(key="a"), source="t", now=1), 1)
        b, _ = await store.observe(new_record(unknown(key="b"), source="t", now=2), 2)
        c, _ = await store.observe(new_record(unknown(key="c"), source="t", now=3), 3)
        await store.ack(b.alert_id, "me", 4)
        await store.close(c.key, "gone", 5)
        assert [r.key for r in await store.active()] == [a.key, b.key]
        assert await store.key_of(a.alert_id) == a.key


class TestMemoryAlertStore(AlertStoreContract):
    """The in-memory store passes the contract."""

    @pytest.fixture
    def store(self) -> AlertStore:
        """A fresh memory store."""
        return MemoryAlertStore()


async def test_book_publishes_open_once_and_close_once() -> None:
    """A condition seen on every poll is published open once, and closed once when it clears."""
    book = AlertBook(MemoryAlertStore(), source="test", clock=lambda: 100)
    out = Published()
    for _ in range(3):
        await book.publish(out, await book.observe([unknown()]))
    await book.publish(out, await book.close({unknown().key: "landed"}))
    await book.publish(out, await book.close({unknown().key: "landed"}))
    states = [(e.state, e.count) for e in out.events if isinstance(e, Alert)]
    assert states == [("open", 1), ("closed", 3)]
    assert await book.store.records() == []


async def test_book_flush_republishes_unconfirmed_events() -> None:
    """Open events that were never confirmed are republished by flush, with the same event id."""
    now = [100]
    book = AlertBook(MemoryAlertStore(), source="test", clock=lambda: now[0])
    lost = await book.observe([unknown()])
    out = Published()
    assert await book.flush(out, older_than_ms=50) == 0
    now[0] = 200
    assert await book.flush(out, older_than_ms=50) == 1
    assert [e.event_id for e in out.events] == [lost[0].event_id]
    assert await book.flush(out, older_than_ms=50) == 0


def test_condition_rejects_unknown_codes() -> None:
    """An alert code that is not registered is refused, so codes stay a stable, known set."""
    with pytest.raises(ValueError, match="unknown alert code"):
        AlertCondition(code="effect.maybe", summary="?")
