"""The alert relay on the real alerts topic feeding a webhook receiver that fails, then recovers."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from agentledger.alerts.model import AlertCondition
from agentledger.reconciler.app import drain_alerts, open_reconciler, relay_forever
from agentledger.settings import CommonSettings
from agentledger.tasks import run_bounded
from tests.hang_report import tasks_report
from tests.integration.test_reconciler import eventually, reconciler_settings

pytestmark = pytest.mark.integration
FAILURES_PER_ALERT = 2
#: A bound on stopping and draining, so a service that does not stop fails the test clearly.
STOP_BOUND_S = 30


@dataclass
class FlakyReceiver:
    """Answers 503 to the first attempts at each alert event, then accepts it."""

    attempts: Counter[str] = field(default_factory=Counter)
    accepted: Counter[str] = field(default_factory=Counter)
    states: list[tuple[str, str]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        """Fail the first attempts of an event id, then record the delivery."""
        key = request.headers["Idempotency-Key"]
        self.attempts[key] += 1
        if self.attempts[key] <= FAILURES_PER_ALERT:
            return web.Response(status=503, text="receiver warming up")
        body = await request.json()
        self.accepted[key] += 1
        self.states.append((body["alert_id"], body["state"]))
        return web.Response(status=200)


async def stopped_within_bound(task: asyncio.Task[None]) -> None:
    """Wait for ``task`` to end, failing the test past :data:`STOP_BOUND_S` (``asyncio.wait``:
    a bound that holds also when the task swallows cancellations, unlike awaiting it)."""
    done, _ = await asyncio.wait({task}, timeout=STOP_BOUND_S)
    if task not in done:
        report = tasks_report(asyncio.get_running_loop())
        pytest.fail(f"the relay did not stop within {STOP_BOUND_S} s\n{report}")
    error = None if task.cancelled() else task.exception()
    if error is not None:
        raise error


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[FlakyReceiver, str]]:
    """The flaky receiver on a free port, and its URL."""
    state = FlakyReceiver()
    app = web.Application()
    app.router.add_post("/alerts", state.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield state, f"http://127.0.0.1:{port}/alerts"
    finally:
        await runner.cleanup()


async def test_webhook_delivers_each_alert_exactly_once(
    ledger_settings: CommonSettings, receiver: tuple[FlakyReceiver, str]
) -> None:
    """Every alert event reaches a recovering receiver once, also when the topic is read again."""
    state, url = receiver
    settings = reconciler_settings(
        ledger_settings,
        "http://127.0.0.1:9",
        "rec-hook",
        webhook_url=url,
        webhook_attempts=5,
        webhook_backoff_base_ms=10,
        webhook_backoff_max_ms=50,
    )
    conditions = [
        AlertCondition(code="run.orphaned", run_id=f"run-{n}", summary=f"orphan {n}")
        for n in range(5)
    ]
    async with open_reconciler(settings) as app:
        for _ in range(2):  # the second sighting is collapsed: no new event
            await app.book.publish(app.log, await app.book.observe(conditions))
        await app.book.publish(app.log, await app.book.close({conditions[0].key: "resumed"}))
        stop = asyncio.Event()
        relay = asyncio.get_running_loop().create_task(relay_forever(app, stop))

        async def all_delivered() -> bool:
            return sum(state.accepted.values()) >= 6

        try:
            await eventually(all_delivered, "six alert events at the receiver")
        finally:
            stop.set()
            relay.cancel()
            await stopped_within_bound(relay)
        assert relay.cancelled()
        drained = await run_bounded(drain_alerts(app), STOP_BOUND_S, name="draining the alerts")
        assert drained == 6  # read again from the start: nothing re-sent
        assert await app.undelivered.entries() == []
    assert set(state.accepted.values()) == {1}
    assert len(state.accepted) == 6
    assert set(state.attempts.values()) == {FAILURES_PER_ALERT + 1}
    assert sorted(s for _, s in state.states) == ["closed"] + ["open"] * 5


async def test_the_relay_ends_when_stop_is_set_without_a_cancel(
    ledger_settings: CommonSettings, receiver: tuple[FlakyReceiver, str]
) -> None:
    """A relay waiting for records returns once ``stop`` is set: stopping never needs a cancel."""
    state, url = receiver
    settings = reconciler_settings(
        ledger_settings, "http://127.0.0.1:9", "rec-stop", webhook_url=url
    )
    condition = AlertCondition(code="run.orphaned", run_id="run-0", summary="orphan 0")
    async with open_reconciler(settings) as app:
        await app.book.publish(app.log, await app.book.observe([condition]))
        stop = asyncio.Event()
        relay = asyncio.get_running_loop().create_task(relay_forever(app, stop))

        async def delivered() -> bool:
            return sum(state.accepted.values()) >= 1

        try:
            await eventually(delivered, "the alert at the receiver")  # the relay is consuming
            stop.set()
            await stopped_within_bound(relay)
        finally:
            relay.cancel()
    assert relay.done()
    assert not relay.cancelled()
