"""The Kafka and Redis ports of a reconciler process (the service, or a one-shot CLI command)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

from redis.asyncio import Redis

from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import ConfigurationError
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.outage import ride_out
from agentledger.reconciler.settings import ReconcilerSettings
from agentledger.redisclient import check_mode, pooled_client, redacted
from agentledger.views.redis_store import RedisViewStore


@dataclass
class ReconcilerPorts:
    """One Redis client (its pool waits when full) shared by leases, views and the alert
    stores, and a transactional event log fenced by those leases."""

    redis: Redis
    leases: RedisLeaseStore
    views: RedisViewStore
    log: KafkaEventLog


async def open_ports(
    stack: AsyncExitStack, settings: ReconcilerSettings, *, transactional_id: str
) -> ReconcilerPorts:
    """Open the ports on ``stack`` (closed with it); ``settings`` carry resolved endpoints."""
    if settings.redis_url is None:
        raise ConfigurationError("no Redis: set AGENTLEDGER_REDIS_URL or start the local stack")
    redis = pooled_client(settings.redis_url, settings=settings)
    stack.push_async_callback(redis.aclose)
    endpoint = redacted(settings.redis_url)
    await ride_out(
        lambda: check_mode(redis, endpoint=endpoint),
        dependency="Redis",
        endpoint=endpoint,
        budget_s=settings.outage_budget_s,
    )
    budget = settings.outage_budget_s
    leases = RedisLeaseStore(
        redis, key_prefix=settings.key_prefix, endpoint=endpoint, outage_budget_s=budget
    )
    views = RedisViewStore(
        redis, key_prefix=settings.key_prefix, url=endpoint, outage_budget_s=budget
    )
    log = await stack.enter_async_context(
        KafkaEventLog(settings, transactional_id=transactional_id, guard=leases)
    )
    return ReconcilerPorts(redis, leases, views, log)
