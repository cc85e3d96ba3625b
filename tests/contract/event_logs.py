"""Builds event logs of each implementation for the contract suite."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

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
async def log_env(kind: str, request: pytest.FixtureRequest) -> AsyncIterator[LogEnv]:
    """Logs of ``kind`` ("memory" or "kafka"); every log built is stopped on exit."""
    async with contextlib.AsyncExitStack() as stack:
        if kind == "memory":
            settings = CommonSettings(topic_prefix=f"t{uuid.uuid4().hex[:8]}.")

            async def make_memory(guard: FenceGuard | None = None) -> EventLog:
                log = MemoryEventLog.from_settings(settings, guard=guard)
                return await stack.enter_async_context(log)

            yield LogEnv(make_memory, TopicNames(settings.topic_prefix), settings.run_partitions)
            return
        from agentledger.bus.kafka import KafkaEventLog  # noqa: PLC0415 - only kafka runs need it

        settings = request.getfixturevalue("ledger_settings")

        async def make_kafka(guard: FenceGuard | None = None) -> EventLog:
            log = KafkaEventLog(settings, transactional_id=f"tx-{uuid.uuid4().hex}", guard=guard)
            return await stack.enter_async_context(log)

        yield LogEnv(make_kafka, TopicNames(settings.topic_prefix), settings.run_partitions)
