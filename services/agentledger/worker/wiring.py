"""The real ports of a worker: Kafka event log, Redis leases (the fence guard), Redis views."""

from __future__ import annotations

from types import TracebackType

from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import ConfigurationError
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import ViewReader
from agentledger.worker.settings import WorkerSettings


class WorkerPorts:
    """Opens and closes the event log, lease store and view reader of one worker process.

    With ``settings.use_views`` (default) resumes read the projector's Redis views when they
    have caught up (the resume barrier), else fold the run from Kafka.

    ``settings`` must carry resolved endpoints (``agentledger.stack.resolve.resolve_settings``).
    """

    def __init__(self, settings: WorkerSettings, *, views: ViewReader | None = None) -> None:
        if settings.kafka_bootstrap is None or settings.redis_url is None:
            msg = "worker settings need kafka_bootstrap and redis_url (resolve them in the CLI)"
            raise ConfigurationError(msg)
        self.settings = settings
        self.leases = RedisLeaseStore.from_settings(settings)
        self.log = KafkaEventLog(settings, transactional_id=settings.producer_id, guard=self.leases)
        self._own_views: RedisViewStore | None = None
        if views is None and settings.use_views:
            self._own_views = RedisViewStore.from_url(
                settings.redis_url, key_prefix=settings.key_prefix
            )
        self.views: ViewReader | None = views or self._own_views
        self._started = False
        self._stopped = False

    async def __aenter__(self) -> WorkerPorts:
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
            await self.log.start()

    async def stop(self) -> None:
        """Commit what is pending, then close everything (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        try:
            await self.log.stop()
        finally:
            await self.leases.stop()
            if self._own_views is not None:
                await self._own_views.close()
