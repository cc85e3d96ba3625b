"""The real ports of a worker: Kafka event log, Redis leases (the fence guard), Redis views."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from agentledger._core.settings import WorkerSettings
from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import ConfigurationError
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.leasing.run_index import RedisRunIndex
from agentledger.outage import ride_out
from agentledger.redisclient import check_mode, pooled_client, redacted
from agentledger.tasks import bounded_close
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import ViewReader


class WorkerPorts:
    """Opens and closes the event log, lease store and view reader of one worker process.

    With ``settings.use_views`` (default) resumes read the projector's Redis views, completed
    from Kafka where the projector is behind (``agentledger._core.loader``).

    Leases and the views it opens share one Redis client whose pool waits for a free connection
    (``redis_max_connections``, ``redis_pool_wait_s``): many concurrent runs queue for a
    connection instead of failing. A ``views`` reader passed in stays open when this closes.

    ``settings`` must carry resolved endpoints (``agentledger.stack.resolve.resolve_settings``).
    """

    def __init__(self, settings: WorkerSettings, *, views: ViewReader | None = None) -> None:
        if settings.kafka_bootstrap is None or settings.redis_url is None:
            msg = "worker settings need kafka_bootstrap and redis_url (resolve them in the CLI)"
            raise ConfigurationError(msg)
        self.settings = settings
        prefix = settings.key_prefix
        self.endpoint = endpoint = redacted(settings.redis_url)
        self.redis = pooled_client(
            settings.redis_url,
            settings=settings,
            max_connections=settings.redis_max_connections,
            wait_s=settings.redis_pool_wait_s,
        )
        budget = settings.outage_budget_s
        self.leases = RedisLeaseStore(
            self.redis, key_prefix=prefix, endpoint=endpoint, outage_budget_s=budget
        )
        #: Which runs were ever opened (``Ledger.from_settings(..., runs=ports.runs)``).
        self.runs = RedisRunIndex(
            self.redis, key_prefix=prefix, endpoint=endpoint, outage_budget_s=budget
        )
        self.log = KafkaEventLog(settings, transactional_id=settings.producer_id, guard=self.leases)
        self._own_views: RedisViewStore | None = None
        if views is None and settings.use_views:
            self._own_views = RedisViewStore(
                self.redis, key_prefix=prefix, url=endpoint, outage_budget_s=budget
            )
        self.views: ViewReader | None = views or self._own_views
        self._started = False
        self._stopped = False

    async def __aenter__(self) -> Self:
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
        """Connect the producer (the lease store connects lazily)."""
        if not self._started:
            self._started = True
            await ride_out(
                lambda: check_mode(self.redis, endpoint=self.endpoint),
                dependency="Redis",
                endpoint=self.endpoint,
                budget_s=self.settings.outage_budget_s,
            )
            await self.log.start()

    async def stop(self) -> None:
        """Commit what is pending, then close everything (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            await self.log.stop()
        finally:
            # The stores borrow the client; closing it disconnects its pool.
            await bounded_close(self.redis.aclose(), f"redis client of {self.endpoint}")
