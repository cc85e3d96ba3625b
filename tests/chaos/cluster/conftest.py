"""Fixtures of the chaos tests on the cluster stack (3 SASL_SSL Kafka brokers + the Redis part).

The cluster runs in its own state dir, ``.agentledger/cluster-tests``, brought up once for this
package on first use and stopped after its last test (its three JVMs never idle beside the rest
of the suite). Tests reach it only through the variables
``agentledger stack env --cluster`` prints, as a deployment would.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest_asyncio
from aiokafka.admin import AIOKafkaAdminClient

from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.events.topics import topic_specs
from agentledger.redisclient import redis_client
from agentledger.settings import CommonSettings
from agentledger.stack import StackPaths
from agentledger.stack.cluster import ClusterStack
from agentledger.stack.cluster_state import ClusterState
from tests.conftest import SESSION_STATE_DIR, IsolatedSettings

CLUSTER_STATE_DIR = SESSION_STATE_DIR / "cluster-tests"


def settings_from_env(env: dict[str, str], **values: object) -> CommonSettings:
    """Settings from ``AGENTLEDGER_*`` variables (as a child process would read them) + values."""
    fields = {key.removeprefix("AGENTLEDGER_").lower(): value for key, value in env.items()}
    return IsolatedSettings(**{**fields, **values})


@dataclass(frozen=True)
class ClusterUnderTest:
    """The session's cluster stack and the variables that point a client at it."""

    stack: ClusterStack

    def state(self) -> ClusterState:
        """What runs now, as recorded."""
        return self.stack.load()

    def env(self) -> dict[str, str]:
        """``agentledger stack env --cluster``, as a mapping."""
        return self.stack.env(self.state())

    def admin(self, bootstrap: str | None = None) -> AIOKafkaAdminClient:
        """An authenticated admin client (not started) on the cluster."""
        state = self.state()
        servers = bootstrap or self.env()["AGENTLEDGER_KAFKA_BOOTSTRAP"]
        return AIOKafkaAdminClient(
            bootstrap_servers=servers, request_timeout_ms=10_000, **self.stack.client_options(state)
        )


@pytest_asyncio.fixture(scope="package", loop_scope="session")
async def cluster(kafka_jar_cache: StackPaths) -> AsyncIterator[ClusterUnderTest]:
    """The cluster stack in its own state dir (jars copied from the session's), down at the end."""
    paths = StackPaths(CLUSTER_STATE_DIR)
    if not paths.jar_manifest.exists():
        shutil.rmtree(paths.jars, ignore_errors=True)
        paths.kafka.mkdir(parents=True, exist_ok=True)
        shutil.copytree(kafka_jar_cache.jars, paths.jars)
        shutil.copy2(kafka_jar_cache.jar_manifest, paths.jar_manifest)
    stack = ClusterStack(CLUSTER_STATE_DIR)
    await stack.up()
    try:
        yield ClusterUnderTest(stack)
    finally:
        await stack.down()


@pytest_asyncio.fixture(loop_scope="session")
async def cluster_settings(cluster: ClusterUnderTest) -> AsyncIterator[CommonSettings]:
    """Settings on the cluster with this test's own topics (ensured) and Redis keys, removed after.

    The cluster is brought back first: a node an earlier test killed is started again.
    """
    await cluster.stack.up()
    tag = f"c{uuid.uuid4().hex[:12]}"
    settings = settings_from_env(
        cluster.env(), state_dir=CLUSTER_STATE_DIR, topic_prefix=f"{tag}.", key_prefix=tag
    )
    specs = topic_specs(settings)
    await ensure_topics(settings, specs)
    yield settings
    await cluster.stack.up()
    await delete_topics(settings, [spec.name for spec in specs])
    assert settings.redis_url is not None
    client = redis_client(settings.redis_url, settings=settings)  # the TLS Redis Cluster
    try:
        keys = [key async for key in client.scan_iter(match=f"{tag}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
