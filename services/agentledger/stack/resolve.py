"""Where Kafka and Redis are for a command: the configured endpoints, else the local stack."""

from __future__ import annotations

from typing import TypeVar

from agentledger.settings import CommonSettings
from agentledger.stack.local import Component, LocalStack
from agentledger.stack.state import Endpoints

S = TypeVar("S", bound=CommonSettings)


async def resolve_endpoints(settings: CommonSettings) -> Endpoints:
    """The given kafka_bootstrap/redis_url; whichever is unset comes from the local stack.

    The local stack is brought up (or reused) under ``settings.state_dir`` and left running.
    """
    missing: list[Component] = []
    if settings.kafka_bootstrap is None:
        missing.append("kafka")
    if settings.redis_url is None:
        missing.append("redis")
    kafka, redis = settings.kafka_bootstrap, settings.redis_url
    if missing:
        report = await LocalStack(settings.state_dir, keep_running=True).up(missing)
        kafka = kafka or report.kafka_bootstrap
        redis = redis or report.redis_url
    if kafka is None or redis is None:  # up() reports every component it was asked for
        msg = "the local stack did not report both endpoints"
        raise AssertionError(msg)
    return Endpoints(kafka_bootstrap=kafka, redis_url=redis)


async def resolve_settings(settings: S) -> S:
    """A copy of ``settings`` with both endpoints filled in (see :func:`resolve_endpoints`)."""
    endpoints = await resolve_endpoints(settings)
    return settings.model_copy(
        update={"kafka_bootstrap": endpoints.kafka_bootstrap, "redis_url": endpoints.redis_url}
    )
