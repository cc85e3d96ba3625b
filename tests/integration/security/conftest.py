"""The secured single node (SASL_SSL + mTLS Kafka, TLS Redis with an ACL user), once per session."""

from __future__ import annotations

import io
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio
import structlog

from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.events.topics import topic_specs
from agentledger.logdefaults import configure_logging
from agentledger.settings import ArgumentsOnly, CommonSettings
from agentledger.stack import StackPaths
from agentledger.stack.procs import is_alive
from agentledger.stack.secure import SecureStack
from tests.conftest import SESSION_STATE_DIR

#: The client configurations the tests run every service with.
MODES = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS")


class Given(ArgumentsOnly, CommonSettings):
    """CommonSettings from explicit values only."""


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def secure(kafka_jar_cache: StackPaths) -> AsyncIterator[SecureStack]:
    """The secured node in <repo>/.agentledger/secure, stopped at the end of the session; the
    teardown fails if any of its processes (the broker, the TLS Redis) outlived the stop."""
    async with SecureStack(SESSION_STATE_DIR / "secure", jars=kafka_jar_cache.jars) as stack:
        yield stack
        started = stack.processes
    survivors = [pid for pid, ticks in started if is_alive(pid, ticks)]
    assert survivors == [], f"the secure stack left processes running: {survivors}"


def mode_values(secure: SecureStack, mode: str) -> dict[str, Any]:
    """The Kafka and Redis settings of one client configuration (Redis is always TLS + ACL)."""
    kafka = secure.mtls_settings() if mode == "mTLS" else secure.kafka_settings(mode)
    return {**kafka, **secure.redis_settings(), "state_dir": SESSION_STATE_DIR}


async def isolated(secure: SecureStack, mode: str) -> AsyncIterator[Given]:
    """Settings of ``mode`` with their own topics (ensured over the secured listener) and keys."""
    tag = f"s{uuid.uuid4().hex[:12]}"
    settings = Given(**mode_values(secure, mode), topic_prefix=f"{tag}.", key_prefix=tag)
    specs = topic_specs(settings)
    await ensure_topics(settings, specs)
    yield settings
    await delete_topics(settings, [spec.name for spec in specs])


@pytest.fixture
def all_logs() -> Iterator[io.StringIO]:
    """Every log line of the process, ours (structlog) and the libraries' (aiokafka, redis,
    asyncio) at DEBUG, captured in one buffer; the process's logging is put back after."""
    handlers, level = logging.root.handlers[:], logging.root.level
    config = structlog.get_config()
    buffer = io.StringIO()
    configure_logging("DEBUG", "json", stream=buffer)
    logging.root.setLevel(logging.DEBUG)
    yield buffer
    logging.root.handlers[:] = handlers
    logging.root.setLevel(level)
    structlog.configure(**config)
