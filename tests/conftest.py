"""Shared fixtures: the local stack once per session, and isolated settings per test.

Only tests that request ``stack`` (integration, chaos) start Kafka and Redis; unit tests never do.
Set AGENTLEDGER_KAFKA_BOOTSTRAP and AGENTLEDGER_REDIS_URL to run against external servers
instead; this module is the only place tests read them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource
from redis.asyncio import Redis

from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.events.topics import topic_specs
from agentledger.settings import CommonSettings
from agentledger.stack import LocalStack, StackPaths, ensure_jars

REPO = Path(__file__).resolve().parent.parent
SESSION_STATE_DIR = REPO / ".agentledger"


@dataclass(frozen=True)
class StackUnderTest:
    """Where the session's Kafka and Redis answer, and the local stack when we run it."""

    kafka_bootstrap: str
    redis_url: str
    local: LocalStack | None  # None when both endpoints are external

    def require_local(self) -> LocalStack:
        """The local stack (to restart or kill the broker); skips when the servers are external."""
        if self.local is None:
            pytest.skip(
                "needs the embedded local stack to control the broker; external "
                "AGENTLEDGER_KAFKA_BOOTSTRAP/AGENTLEDGER_REDIS_URL were given"
            )
        return self.local


class IsolatedSettings(CommonSettings):
    """CommonSettings built only from explicit values: the environment cannot leak into tests."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Use the constructor's arguments only."""
        return (init_settings,)


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
    async with LocalStack(SESSION_STATE_DIR) as local:
        endpoints = local.endpoints
        yield StackUnderTest(
            kafka_bootstrap=kafka or endpoints.kafka_bootstrap,
            redis_url=redis or endpoints.redis_url,
            local=local,
        )


@pytest_asyncio.fixture(loop_scope="session")
async def ledger_settings(stack: StackUnderTest) -> AsyncIterator[CommonSettings]:
    """Settings on the session stack with this test's own topics (ensured) and Redis keys.

    The topics are deleted and the keys removed after the test.
    """
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
