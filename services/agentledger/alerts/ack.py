"""Acknowledging an alert from outside the reconciler (``alerts ack``, the console's button)."""

from __future__ import annotations

from agentledger.alerts.book import AlertBook
from agentledger.alerts.redis_store import RedisAlertStore
from agentledger.bus.publisher import KafkaPublisher
from agentledger.errors import ConfigurationError
from agentledger.events.models import Alert
from agentledger.redisclient import redis_client
from agentledger.settings import CommonSettings


async def ack_alert(settings: CommonSettings, alert_id: str, by: str) -> Alert | None:
    """Mark the open alert ``alert_id`` acknowledged by ``by`` and publish the event.

    None when no open alert has that id.
    """
    if settings.redis_url is None:
        raise ConfigurationError("no Redis: set AGENTLEDGER_REDIS_URL or start the local stack")
    redis = redis_client(settings.redis_url, settings=settings)
    try:
        book = AlertBook(RedisAlertStore(redis, settings.key_prefix), source="cli")
        event = await book.ack(alert_id, by)
        if event is None:
            return None
        async with KafkaPublisher(settings, client_id="agentledger-alerts-ack") as publisher:
            await book.publish(publisher, [event])
        return event
    finally:
        await redis.aclose()
