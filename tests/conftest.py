"""Shared fixtures: the local stack once per session, and isolated settings per test.

Only tests that request ``stack`` (integration, chaos) start Kafka and Redis; unit tests never do.
Set AGENTLEDGER_KAFKA_BOOTSTRAP and AGENTLEDGER_REDIS_URL to run against external servers
instead; this module is the only place tests read them.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
import structlog
from hypothesis import settings as hypothesis_settings
from redis.asyncio import Redis

from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.events.topics import topic_specs
from agentledger.settings import ArgumentsOnly, CommonSettings
from agentledger.stack import LocalStack, StackPaths, ensure_jars
from agentledger.stack.local import Component
from tests.hang_report import item_timeout, start_watch

# CI explores the same examples on every run (a property failure there is reproducible from the
# log); a developer's run keeps exploring new ones.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    hypothesis_settings.load_profile("ci")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def logging_restored() -> Iterator[None]:
    """Whatever a test configured (an in-process CLI call points logging at the test's captured
    stderr, at its --log-level), the next test gets the process's logging and structlog back."""
    handlers, level = logging.root.handlers[:], logging.root.level
    configured, config = structlog.is_configured(), structlog.get_config()
    yield
    logging.root.handlers[:] = handlers
    logging.root.setLevel(level)
    if configured:
        structlog.configure(**config)
    else:
        structlog.reset_defaults()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """A test that hangs prints its asyncio tasks' stacks before pytest-timeout fails it."""
    watch = start_watch(item.nodeid, item_timeout(item))
    try:
        yield
    finally:
        if watch is not None:
            watch.cancel()


SESSION_STATE_DIR = REPO / ".agentledger"


@dataclass(frozen=True)
class StackUnderTest:
    """Where the session's Kafka and Redis answer, and the local stack when we run (part of) it."""

    kafka_bootstrap: str
    redis_url: str
    local: LocalStack | None  # None when both endpoints are external

    async def restart_kafka(self) -> None:
        """Stop the broker and start it again on the same port and data (chaos tests)."""
        await self.require_local().restart_kafka()

    def require_local(self) -> LocalStack:
        """The local stack (to kill or restart the broker); skips when Kafka is external."""
        if self.local is None or "kafka" not in self.local.components:
            pytest.skip(
                "needs the embedded local Kafka to control the broker; an external "
                "AGENTLEDGER_KAFKA_BOOTSTRAP was given"
            )
        return self.local

    def require_local_redis(self) -> LocalStack:
        """The local stack, for a test that SIGKILLs and restarts Redis: it can do that only for
        the Redis the test stack started, so it skips when AGENTLEDGER_REDIS_URL names another."""
        local = self.require_local()
        if "redis" not in local.components:
            pytest.skip(
                "this test SIGKILLs and restarts the Redis process, which it can do only for the "
                "Redis the test stack started; AGENTLEDGER_REDIS_URL points at an external one"
            )
        return local


class IsolatedSettings(ArgumentsOnly, CommonSettings):
    """CommonSettings built only from explicit values: the environment cannot leak into tests."""


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def stack() -> AsyncIterator[StackUnderTest]:
    """The session's Kafka + Redis: external if both env vars are set, else the local stack.

    The local stack lives in ``<repo>/.agentledger``; a stack already running there is reused
    and left running, one started here is stopped at the end of the session.
    """
    kafka = os.environ.get("AGENTLEDGER_KAFKA_BOOTSTRAP") or None
    redis = os.environ.get("AGENTLEDGER_REDIS_URL") or None
    if kafka is not None and redis is not None:
        yield StackUnderTest(kafka_bootstrap=kafka, redis_url=redis, local=None)
        return
    missing: list[Component] = [
        name for name, url in (("kafka", kafka), ("redis", redis)) if not url
    ]
    async with LocalStack(SESSION_STATE_DIR, components=missing) as local:
        assert local.last_up is not None
        kafka = kafka or local.last_up.kafka_bootstrap
        redis = redis or local.last_up.redis_url
        assert kafka is not None
        assert redis is not None
        yield StackUnderTest(kafka_bootstrap=kafka, redis_url=redis, local=local)


@pytest_asyncio.fixture(loop_scope="session")
async def ledger_settings(stack: StackUnderTest) -> AsyncIterator[CommonSettings]:
    """Settings on the session stack with this test's own topics (ensured) and Redis keys.

    The topics are deleted and the keys removed after the test.
    """
    if stack.local is not None:
        # Cheap when healthy; restarts a half that an earlier (chaos) test left dead.
        await stack.local.up(stack.local.components)
    tag = f"t{uuid.uuid4().hex[:12]}"
    settings = IsolatedSettings(
        kafka_bootstrap=stack.kafka_bootstrap,
        redis_url=stack.redis_url,
        state_dir=SESSION_STATE_DIR,
        topic_prefix=f"{tag}.",
        key_prefix=tag,
    )
    specs = topic_specs(settings)
    await ensure_topics(settings, specs)
    yield settings
    await delete_topics(settings, [spec.name for spec in specs])
    client = Redis.from_url(stack.redis_url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{tag}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def kafka_jar_cache() -> StackPaths:
    """A verified Kafka jar set in the session state dir (fetched once), for stack tests to copy."""
    paths = StackPaths(SESSION_STATE_DIR)
    await ensure_jars(paths)
    return paths
