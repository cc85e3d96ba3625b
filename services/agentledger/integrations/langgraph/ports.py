"""The real ports of a saver: Kafka log (fenced by Redis leases), Redis views, run index."""

from __future__ import annotations

from types import TracebackType

from agentledger.bus.admin import ensure_topics
from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import ConfigurationError
from agentledger.events.topics import topic_specs
from agentledger.integrations.langgraph.runindex import RedisRunIndex
from agentledger.integrations.langgraph.settings import SaverSettings
from agentledger.leasing.redis_store import RedisLeaseStore, redacted
from agentledger.redisclient import pooled_client
from agentledger.views.redis_store import RedisViewStore


class SaverPorts:
    """Opens and closes what a saver talks to; ``settings`` must carry resolved endpoints.

    Leases, views and the run index share one Redis client whose pool waits for a free
    connection (``redis_max_connections``, ``redis_pool_wait_s``; redis-py's default pool
    raises past its limit, and every held thread renews its lease on its own schedule).
    """

    def __init__(self, settings: SaverSettings) -> None:
        if settings.kafka_bootstrap is None or settings.redis_url is None:
            msg = "saver settings need kafka_bootstrap and redis_url (resolve_settings first)"
            raise ConfigurationError(msg)
        self.settings = settings
        url, prefix = settings.redis_url, settings.key_prefix
        endpoint = redacted(url)
        self._redis = pooled_client(
            url,
            max_connections=settings.redis_max_connections,
            wait_s=settings.redis_pool_wait_s,
        )
        self.leases = RedisLeaseStore(self._redis, key_prefix=prefix, endpoint=endpoint)
        self.log = KafkaEventLog(settings, transactional_id=settings.producer_id, guard=self.leases)
        self.views = (
            RedisViewStore(self._redis, key_prefix=prefix, url=endpoint)
            if settings.use_views
            else None
        )
        self.run_index = RedisRunIndex(self._redis, key_prefix=prefix, endpoint=endpoint)
        self._started = False
        self._stopped = False

    async def __aenter__(self) -> SaverPorts:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Make sure the topics exist, then connect the producer."""
        if not self._started:
            self._started = True
            await ensure_topics(self.settings, topic_specs(self.settings))
            await self.log.start()

    async def stop(self) -> None:
        """Commit what is pending, then close everything (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            await self.log.stop()
        finally:
            await self._redis.aclose()  # disconnects its pool too
