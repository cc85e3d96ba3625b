"""The webhook sink's retries and dead letter, and the relay's once-per-sink delivery."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from agentledger.alerts.book import AlertBook
from agentledger.alerts.delivery import MemoryDeliveryLedger, MemorySinkDeadLetter
from agentledger.alerts.relay import AlertRelay
from agentledger.alerts.retry import Backoff
from agentledger.alerts.sinks import AlertSink, LogSink, WebhookSink
from agentledger.alerts.store import MemoryAlertStore
from agentledger.bus.port import EventPublisher
from agentledger.errors import DecodeError
from agentledger.events.models import Alert, DeadLettered, Event


def alert(n: int = 1) -> Alert:
    """An open alert event."""
    return Alert(
        alert_id=f"alr_{n}",
        code="effect.unknown",
        severity="critical",
        summary=f"alert {n}",
        run_id="r1",
        detail_json='{"k": 1}',
    )


@dataclass
class Receiver:
    """A webhook receiver that answers ``failures`` errors before accepting."""

    failures: int = 0
    status: int = 503
    bodies: list[dict[str, object]] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    calls: int = 0

    async def handle(self, request: web.Request) -> web.Response:
        """Fail while failures remain, then record the delivery."""
        self.calls += 1
        if self.failures > 0:
            self.failures -= 1
            return web.Response(status=self.status, text="not now")
        self.bodies.append(await request.json())
        self.keys.append(request.headers["Idempotency-Key"])
        return web.Response(status=204)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    """A running receiver and its URL."""
    state = Receiver()
    app = web.Application()
    app.router.add_post("/hook", state.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield state, f"http://127.0.0.1:{port}/hook"
    finally:
        await runner.cleanup()


async def no_sleep(_: float) -> None:
    """Retry at once in tests (the backoff arithmetic is tested on its own)."""


def webhook(url: str, dead: MemorySinkDeadLetter, attempts: int = 5) -> WebhookSink:
    """A webhook sink that does not wait between attempts."""
    return WebhookSink(url, dead_letter=dead, attempts=attempts, sleep=no_sleep, timeout_s=5)


async def test_webhook_retries_until_the_receiver_recovers(receiver: tuple[Receiver, str]) -> None:
    """Three 503s then success: the alert is delivered once, keyed by its event id."""
    state, url = receiver
    state.failures = 3
    dead = MemorySinkDeadLetter()
    async with webhook(url, dead) as sink:
        event = alert()
        assert await sink.deliver(event)
    assert state.calls == 4
    assert state.keys == [event.event_id]
    assert state.bodies[0]["detail"] == {"k": 1}
    assert await dead.entries() == []


async def test_webhook_dead_letters_after_its_attempts(receiver: tuple[Receiver, str]) -> None:
    """A receiver that keeps failing gets every configured attempt, then the dead letter."""
    state, url = receiver
    state.failures = 100
    dead = MemorySinkDeadLetter()
    async with webhook(url, dead, attempts=4) as sink:
        assert not await sink.deliver(alert())
    assert state.calls == 4
    [entry] = await dead.entries()
    assert entry.attempts == 4
    assert "HTTP 503" in entry.error


async def test_webhook_does_not_retry_a_refusal(receiver: tuple[Receiver, str]) -> None:
    """A 400 cannot be fixed by retrying: one call, straight to the dead letter."""
    state, url = receiver
    state.failures, state.status = 100, 400
    dead = MemorySinkDeadLetter()
    async with webhook(url, dead) as sink:
        assert not await sink.deliver(alert())
    assert state.calls == 1
    assert len(await dead.entries()) == 1


async def test_webhook_treats_a_dead_endpoint_as_retryable() -> None:
    """Connection refused is retried like a 5xx and ends in the dead letter."""
    dead = MemorySinkDeadLetter()
    async with webhook("http://127.0.0.1:9/hook", dead, attempts=2) as sink:
        assert not await sink.deliver(alert())
    [entry] = await dead.entries()
    assert entry.attempts == 2


def test_backoff_doubles_up_to_the_cap_and_jitters_down() -> None:
    """Delays double from the base, stop at the cap, and jitter only shortens them (to half)."""
    b = Backoff(base_ms=100, max_ms=1000)
    assert [b.delay_ms(n) for n in range(1, 6)] == [100, 200, 400, 800, 1000]
    assert b.delay_ms(3, jitter=1.0) == 200
    assert b.delay_ms(0) == 0
    assert b.total_ms(3) == 700


class Counting(AlertSink):
    """Counts deliveries per event id."""

    name = "counting"

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def deliver(self, alert: Alert) -> bool:
        """Count it."""
        self.seen.append(alert.event_id)
        return True


async def test_relay_delivers_each_event_once_per_sink() -> None:
    """Re-reading the same alert events (a restart) delivers nothing twice."""
    sink = Counting()
    relay = AlertRelay([sink, LogSink()], MemoryDeliveryLedger())
    events = [alert(1), alert(2)]
    for event in [*events, *events]:
        await relay.handle(event)
    assert sink.seen == [e.event_id for e in events]
    assert relay.delivered == 4


async def test_relay_collapses_dead_letters_per_source_topic() -> None:
    """Three poison records from one topic raise one deadletter.record alert counted three."""

    class Out(EventPublisher):
        def __init__(self) -> None:
            self.events: list[Event] = []

        async def publish(self, events: Sequence[Event]) -> None:
            self.events.extend(events)

    out = Out()
    book = AlertBook(MemoryAlertStore(), source="reconciler")
    relay = AlertRelay([], MemoryDeliveryLedger(), book=book, publisher=out)
    for offset in range(3):
        await relay.handle(
            DeadLettered(
                reason="not Avro",
                source_topic="x.runs.steps",
                source_partition=0,
                source_offset=offset,
            )
        )
    assert [
        json.loads(e.detail_json)["source_offset"] for e in out.events if isinstance(e, Alert)
    ] == [0]
    [record] = await book.active()
    assert record.code == "deadletter.record"
    assert record.count == 3


async def test_relay_dead_letters_an_undecodable_alert_record() -> None:
    """A record on the alerts topic that cannot be decoded is moved to the dead letter, not lost."""

    @dataclass(frozen=True)
    class Raw:
        topic: str = "x.alerts"
        partition: int = 0
        offset: int = 7
        key: bytes | None = b"k"
        value: bytes | None = b"garbage"
        event: Event | None = None
        error: DecodeError | None = None

    class Out(EventPublisher):
        def __init__(self) -> None:
            self.events: list[Event] = []

        async def publish(self, events: Sequence[Event]) -> None:
            self.events.extend(events)

    out = Out()
    relay = AlertRelay([Counting()], MemoryDeliveryLedger(), publisher=out)
    await relay.handle_record(Raw(error=DecodeError("not Avro", topic="x.alerts", offset=7)))
    [dead] = out.events
    assert isinstance(dead, DeadLettered)
    assert (dead.source_topic, dead.source_offset, dead.value) == ("x.alerts", 7, b"garbage")
    assert "not Avro" in dead.reason
