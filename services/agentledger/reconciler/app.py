"""Wiring the reconciler to Kafka, Redis and the providers, and running it as a service.

:func:`open_reconciler` builds every adapter from settings (the local stack fills endpoints that
are unset) and closes them in reverse order. :func:`serve` runs passes until stopped, with the
alert relay feeding the sinks from the alerts and dead-letter topics alongside.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from functools import partial
from typing import Any

import structlog

from agentledger import outage
from agentledger._core.ports import Ports
from agentledger.alerts.book import AlertBook
from agentledger.alerts.delivery import SinkDeadLetter
from agentledger.alerts.redis_store import (
    RedisAlertStore,
    RedisDeliveryLedger,
    RedisSinkDeadLetter,
)
from agentledger.alerts.relay import AlertRelay
from agentledger.alerts.sinks import AlertSink, LogSink, WebhookSink, alert_body
from agentledger.alerts.vendors import pagerduty_body, slack_body
from agentledger.bus.consumer import KafkaEventConsumer
from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import AgentLedgerError, UnreachableError
from agentledger.events.models import Alert
from agentledger.events.topics import topic_names
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.providers.protocol import Provider
from agentledger.reconciler.prometheus import ReconcilerMetrics
from agentledger.reconciler.providers import ProviderPool
from agentledger.reconciler.service import Reconciler
from agentledger.reconciler.settings import ReconcilerSettings
from agentledger.redisclient import redacted
from agentledger.stack.resolve import resolve_settings
from agentledger.telemetry.prom import serving_metrics
from agentledger.views.redis_store import RedisViewStore

_log = structlog.get_logger(__name__)
RELAY_RETRY_S = 5.0


@dataclass
class ReconcilerApp:
    """The reconciler and everything it was built on."""

    settings: ReconcilerSettings
    reconciler: Reconciler
    relay: AlertRelay
    book: AlertBook
    log: KafkaEventLog
    views: RedisViewStore
    leases: RedisLeaseStore
    undelivered: RedisSinkDeadLetter


@asynccontextmanager
async def open_reconciler(
    settings: ReconcilerSettings, *, adapters: Mapping[str, Provider] | None = None
) -> AsyncIterator[ReconcilerApp]:
    """Build the reconciler on Kafka and Redis; ``adapters`` override providers by name."""
    settings = await resolve_settings(settings)
    async with AsyncExitStack() as stack:
        ports = await stack.enter_async_context(
            Ports(settings, transactional_id=f"{settings.topic_prefix}{settings.reconciler_id}")
        )
        redis, leases, views, log = ports.redis, ports.leases, ports.store, ports.log
        providers = await stack.enter_async_context(ProviderPool.from_settings(settings, adapters))
        endpoint = redacted(settings.redis_url or "")  # as the other Redis stores name it
        book = AlertBook(
            RedisAlertStore(redis, settings.key_prefix, endpoint=endpoint), source="reconciler"
        )
        undelivered = RedisSinkDeadLetter(redis, settings.key_prefix, endpoint=endpoint)
        sinks: list[AlertSink] = [LogSink()] if settings.alerts_log else []
        for webhook in webhook_sinks(settings, undelivered):
            sinks.append(await stack.enter_async_context(webhook))
        relay = AlertRelay(
            sinks,
            RedisDeliveryLedger(redis, settings.key_prefix, endpoint=endpoint),
            book=book,
            publisher=log,
        )
        reconciler = Reconciler(
            settings, log=log, views=views, leases=leases, providers=providers, book=book
        )
        yield ReconcilerApp(settings, reconciler, relay, book, log, views, leases, undelivered)


def webhook_sinks(settings: ReconcilerSettings, undelivered: SinkDeadLetter) -> list[WebhookSink]:
    """The HTTP sinks the settings name: the generic webhook, PagerDuty, Slack."""
    found: list[tuple[str, str, Callable[[Alert], dict[str, Any]]]] = []
    if settings.webhook_url is not None:
        found.append(("webhook", settings.webhook_url, alert_body))
    if settings.pagerduty_routing_key is not None:
        key = settings.pagerduty_routing_key.get_secret_value()
        found.append(
            ("pagerduty", settings.pagerduty_url, partial(pagerduty_body, routing_key=key))
        )
    if settings.slack_webhook_url is not None:
        found.append(("slack", settings.slack_webhook_url.get_secret_value(), slack_body))
    return [
        WebhookSink(
            url,
            name=name,
            body=body,
            dead_letter=undelivered,
            attempts=settings.webhook_attempts,
            backoff=settings.webhook_backoff,
            timeout_s=settings.webhook_timeout_s,
        )
        for name, url, body in found
    ]


def _relay_topics(settings: ReconcilerSettings) -> list[str]:
    names = topic_names(settings)
    return [names.alerts, names.deadletter]


async def relay_forever(app: ReconcilerApp, stop: asyncio.Event) -> None:
    """Feed the sinks from the alerts topics in a consumer group until ``stop`` or cancelled.

    ``stop`` ends the relay even while it waits for records (it never relies on a cancellation
    alone, which a library may swallow); a failed consumer is rebuilt after ``RELAY_RETRY_S``,
    unless Kafka has been unreachable for longer than the outage budget (then its error).
    """
    group = f"{app.settings.topic_prefix}reconciler.alert-relay"
    while not stop.is_set():
        failed = False
        try:
            async with KafkaEventConsumer(
                app.settings, _relay_topics(app.settings), group_id=group, client_id=group
            ) as consumer:
                await until_stopped(app.relay.consume(consumer, commit=consumer), stop)
        except* AgentLedgerError as group_error:
            for e in group_error.exceptions:
                counted = outage.spent(e, app.settings.outage_budget_s)
                fatal = None if counted is None else counted[1]
                if fatal is not None:  # past the outage budget: the service stops
                    _log.error("alert_relay_gave_up", error=str(fatal))
                    if fatal is e:
                        raise
                    raise fatal from e
                retryable = e.retryable if isinstance(e, AgentLedgerError) else None
                _log.error("alert_relay_failed", error=str(e), retryable=retryable)
            failed = True
        if failed:
            with suppress(TimeoutError):
                async with asyncio.timeout(RELAY_RETRY_S):
                    await stop.wait()


async def until_stopped(work: Coroutine[object, object, object], stop: asyncio.Event) -> None:
    """Await ``work`` until it ends or ``stop`` is set, then cancel it (its errors propagate).

    Errors come wrapped in an ExceptionGroup (``except*``): work and watcher share a TaskGroup.
    """
    async with asyncio.TaskGroup() as tg:
        worker = tg.create_task(work)
        watcher = tg.create_task(stop.wait())
        worker.add_done_callback(lambda _: watcher.cancel())
        watcher.add_done_callback(lambda _: worker.cancel())


async def drain_alerts(app: ReconcilerApp) -> int:
    """Feed the sinks everything on the alerts topics now (the ledger skips what was handled)."""
    async with KafkaEventConsumer(
        app.settings, _relay_topics(app.settings), until_end=True, from_beginning=True
    ) as consumer:
        return await app.relay.consume(consumer)


async def serve(app: ReconcilerApp, stop: asyncio.Event, *, relay: bool = True) -> None:
    """Reconcile pass after pass, and relay alerts, until ``stop`` is set; raises the
    UnreachableError of a dependency unreachable for longer than the outage budget."""
    async with AsyncExitStack() as stack:
        port = app.settings.reconciler_metrics_port
        if port is not None:
            metrics = ReconcilerMetrics(
                app.views, app.book, scan_limit=app.settings.reconciler_scan_limit
            )
            app.reconciler.observers.append(metrics.observe)
            await stack.enter_async_context(
                serving_metrics(app.settings.reconciler_metrics_host, port, metrics.render)
            )
        try:
            async with asyncio.TaskGroup() as tg:
                relay_task = tg.create_task(relay_forever(app, stop)) if relay else None
                await app.reconciler.run(stop)
                if relay_task is not None:
                    relay_task.cancel()
        except* UnreachableError as gave_up:  # past the outage budget: one clear error
            raise gave_up.exceptions[0] from None
