"""PagerDuty Events API v2 and Slack incoming-webhook sinks, against local receivers that check
the documented payload shapes: the alert id is the dedup key, closing an alert resolves it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from aiohttp import web
from pydantic import SecretStr

from agentledger.alerts.book import AlertBook
from agentledger.alerts.codes import EFFECT_UNKNOWN
from agentledger.alerts.delivery import MemorySinkDeadLetter
from agentledger.alerts.model import AlertCondition
from agentledger.alerts.store import MemoryAlertStore
from agentledger.console.testing import reconciler_settings
from agentledger.events.models import Alert
from agentledger.reconciler.app import webhook_sinks
from agentledger.settings import CommonSettings

PD_ACTIONS = {"trigger", "acknowledge", "resolve"}
PD_SEVERITIES = {"critical", "error", "warning", "info"}
ROUTING_KEY = "R0UTINGKEY0000000000000000000001"


def pagerduty_errors(body: dict[str, Any]) -> list[str]:
    """What PagerDuty's Events API v2 would refuse in ``body`` (its documented required fields)."""
    errors = []
    if not isinstance(body.get("routing_key"), str) or not body["routing_key"]:
        errors.append("routing_key is required")
    if body.get("event_action") not in PD_ACTIONS:
        errors.append("event_action must be trigger, acknowledge or resolve")
    dedup = body.get("dedup_key")
    if dedup is not None and (not isinstance(dedup, str) or len(dedup) > 255):
        errors.append("dedup_key must be a string of at most 255 characters")
    if body.get("event_action") in {"acknowledge", "resolve"} and not dedup:
        errors.append("dedup_key is required to acknowledge or resolve")
    if body.get("event_action") == "trigger":
        payload = body.get("payload")
        if not isinstance(payload, dict):
            return [*errors, "payload is required to trigger"]
        summary = payload.get("summary")
        if not isinstance(summary, str) or not 0 < len(summary) <= 1024:
            errors.append("payload.summary is required (1-1024 characters)")
        if not isinstance(payload.get("source"), str) or not payload["source"]:
            errors.append("payload.source is required")
        if payload.get("severity") not in PD_SEVERITIES:
            errors.append("payload.severity must be critical, error, warning or info")
        if "timestamp" in payload:
            datetime.fromisoformat(payload["timestamp"])
        if "custom_details" in payload and not isinstance(payload["custom_details"], dict):
            errors.append("payload.custom_details must be an object")
    return errors


def slack_errors(body: dict[str, Any]) -> list[str]:
    """What a Slack incoming webhook would refuse: no text, or malformed section blocks."""
    errors = []
    if not isinstance(body.get("text"), str) or not body["text"].strip():
        errors.append("no_text")
    for block in body.get("blocks", []):
        text = block.get("text", {})
        shaped = block.get("type") == "section" and text.get("type") in {"mrkdwn", "plain_text"}
        if not shaped or not 0 < len(text.get("text", "")) <= 3000:
            errors.append("invalid_blocks")
    return errors


@dataclass
class Receivers:
    """Local PagerDuty and Slack endpoints that validate and keep what they accepted."""

    pagerduty: list[dict[str, Any]] = field(default_factory=list)
    slack: list[dict[str, Any]] = field(default_factory=list)

    async def enqueue(self, request: web.Request) -> web.Response:
        """PagerDuty's ``/v2/enqueue``: 202 with the dedup key, 400 with errors."""
        if request.content_type != "application/json":
            return web.json_response({"status": "invalid event"}, status=400)
        body = await request.json()
        errors = pagerduty_errors(body)
        if errors:
            return web.json_response(
                {"status": "invalid event", "message": "Event object is invalid",
                 "errors": errors}, status=400,
            )  # fmt: skip
        self.pagerduty.append(body)
        return web.json_response(
            {"status": "success", "message": "Event processed", "dedup_key": body["dedup_key"]},
            status=202,
        )

    async def webhook(self, request: web.Request) -> web.Response:
        """Slack's incoming webhook: ``ok``, or 400 with the error name."""
        body = await request.json()
        errors = slack_errors(body)
        if errors:
            return web.Response(status=400, text=errors[0])
        self.slack.append(body)
        return web.Response(text="ok")


@pytest.fixture
async def receivers() -> AsyncIterator[tuple[Receivers, str]]:
    """Both receivers running on one local port; their base URL."""
    state = Receivers()
    app = web.Application()
    app.router.add_post("/v2/enqueue", state.enqueue)
    app.router.add_post("/services/T000/B000/XXXX", state.webhook)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield state, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def unknown_effect(count_hint: str = "") -> AlertCondition:
    """An effect.unknown condition on one run's effect."""
    return AlertCondition(
        code=EFFECT_UNKNOWN.code, summary=f"the provider cannot tell {count_hint}",
        run_id="run-7", step=2, effect="refund_payment", idempotency_key="key-7",
    )  # fmt: skip


async def deliver_all(base: str, dead: MemorySinkDeadLetter, events: list[Alert]) -> list[str]:
    """Build the sinks from settings and hand them every event; the sinks' names."""
    settings = reconciler_settings(
        CommonSettings.model_construct(),
        pagerduty_routing_key=SecretStr(ROUTING_KEY),
        pagerduty_url=f"{base}/v2/enqueue",
        slack_webhook_url=SecretStr(f"{base}/services/T000/B000/XXXX"),
        webhook_attempts=1,
    )
    sinks = webhook_sinks(settings, dead)
    for sink in sinks:
        async with sink:
            for event in events:
                assert await sink.deliver(event), await dead.entries(10)
    return [s.name for s in sinks]


async def test_pagerduty_triggers_once_per_alert_and_resolves_on_close(
    receivers: tuple[Receivers, str],
) -> None:
    """Open, seen again, closed: PagerDuty gets trigger, trigger, resolve, all with the alert's
    id as dedup key and the documented fields; Slack gets two alerts and a resolved message."""
    state, base = receivers
    book = AlertBook(MemoryAlertStore(), source="reconciler")
    record, opened = await book.sight(unknown_effect())
    _, again = await book.sight(unknown_effect())
    closed = await book.close({record.key: "the provider answered"})
    events = [*opened, *again, *closed]
    assert [e.state for e in events] == ["open", "closed"]  # a repeat sighting emits nothing
    events.insert(1, opened[0].model_copy(update={"count": 2}))  # a re-published sighting

    names = await deliver_all(base, MemorySinkDeadLetter(), events)

    assert names == ["pagerduty", "slack"]
    pd = state.pagerduty
    assert [b["event_action"] for b in pd] == ["trigger", "trigger", "resolve"]
    assert {b["dedup_key"] for b in pd} == {record.alert_id}
    assert {b["routing_key"] for b in pd} == {ROUTING_KEY}
    trigger = pd[0]["payload"]
    assert trigger["severity"] == "critical"
    assert trigger["class"] == "effect.unknown"
    assert trigger["custom_details"]["idempotency_key"] == "key-7"
    assert trigger["custom_details"]["action"] == record.action
    assert [("RESOLVED" in m["text"], record.alert_id in m["text"]) for m in state.slack] == [
        (False, True), (False, True), (True, True),
    ]  # fmt: skip


async def test_an_acknowledged_alert_resolves_the_incident(
    receivers: tuple[Receivers, str],
) -> None:
    """An ack closes the alert here (it is muted while its condition lasts), so PagerDuty's
    incident is resolved with the same dedup key."""
    state, base = receivers
    book = AlertBook(MemoryAlertStore(), source="reconciler")
    record, opened = await book.sight(unknown_effect())
    acked = await book.ack(record.alert_id, "oncall")
    assert acked is not None

    await deliver_all(base, MemorySinkDeadLetter(), [*opened, acked])

    assert [(b["event_action"], b["dedup_key"]) for b in state.pagerduty] == [
        ("trigger", record.alert_id), ("resolve", record.alert_id),
    ]  # fmt: skip


async def test_a_refused_payload_is_dead_lettered_under_the_sink_name(
    receivers: tuple[Receivers, str],
) -> None:
    """A receiver's 400 is not retried: the event lands in the dead letter named by its sink."""
    _, base = receivers
    dead = MemorySinkDeadLetter()
    bad = Alert(alert_id="a" * 300, code="effect.unknown", severity="critical", summary="x")
    settings = reconciler_settings(
        CommonSettings.model_construct(), pagerduty_routing_key=SecretStr(ROUTING_KEY),
        pagerduty_url=f"{base}/v2/enqueue", webhook_attempts=3,
    )  # fmt: skip
    [sink] = webhook_sinks(settings, dead)
    async with sink:
        assert not await sink.deliver(bad)
    [entry] = await dead.entries(10)
    assert entry.sink == "pagerduty"
    assert entry.attempts == 1
    assert "HTTP 400" in entry.error
