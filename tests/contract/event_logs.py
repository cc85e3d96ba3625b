"""Builds event logs of each implementation for the contract suite."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.memory import MemoryEventLog
from agentledger.bus.port import EventLog, FenceGuard
from agentledger.events import TopicNames
from agentledger.settings import CommonSettings


@dataclass(frozen=True)
class LogEnv:
    """A way to build logs on this test's topics, and what those topics look like."""

    make: Callable[..., Awaitable[EventLog]]
    topics: TopicNames
    partitions: int


@contextlib.asynccontextmanager
async def log_env(settings: CommonSettings | None) -> AsyncIterator[LogEnv]:
    """In-memory logs if ``settings`` is None, else Kafka logs; every log is stopped on exit."""
    async with contextlib.AsyncExitStack() as stack:
        if settings is None:
            settings = CommonSettings(topic_prefix=f"t{uuid.uuid4().hex[:8]}.")

            async def make_memory(guard: FenceGuard | None = None) -> EventLog:
                log = MemoryEventLog.from_settings(settings, guard=guard)
                return await stack.enter_async_context(log)

            yield LogEnv(make_memory, TopicNames(settings.topic_prefix), settings.run_partitions)
            return
        kafka_settings = settings

        async def make_kafka(guard: FenceGuard | None = None) -> EventLog:
            log = KafkaEventLog(
                kafka_settings, transactional_id=f"tx-{uuid.uuid4().hex}", guard=guard
            )
            return await stack.enter_async_context(log)

        yield LogEnv(make_kafka, TopicNames(settings.topic_prefix), settings.run_partitions)
