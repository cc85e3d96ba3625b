"""The one composition root of every process that writes runs: a Kafka event log fenced by
Redis leases, the Redis views and the run index, on one Redis client.

:class:`Ports` is what the reconciler (the service and ``effects resolve``) opens;
:class:`WorkerPorts` is the same assembly shaped by a worker's settings, which the SDK's
``connect()``, the fleet worker, the operator's ledger, the demo and the LangGraph saver
(``SaverPorts``) open. Nothing else builds these clients for a writer.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Self

from agentledger._core.settings import WorkerSettings
from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import ConfigurationError
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.leasing.run_index import RedisRunIndex
from agentledger.outage import ride_out
from agentledger.redisclient import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_POOL_WAIT_S,
    check_mode,
    is_cluster,
    pooled_client,
    redacted,
)
from agentledger.settings import CommonSettings
from agentledger.tasks import bounded_close
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import ViewReader


class Ports:
    """Opens and closes one process's event log, lease store, view store and run index.

    Leases, views and the run index share one Redis client whose pool waits for a free
    connection (``max_connections``, ``pool_wait_s``): many concurrent callers queue for a
    connection instead of failing. The log's producer uses ``transactional_id`` and is fenced by
    the leases (invariant 3). A ``views`` reader passed in is used instead of the Redis views
    and stays open when this closes.

    ``settings`` must carry resolved endpoints (``agentledger.stack.resolve.resolve_settings``).
    """

    def __init__(
        self,
        settings: CommonSettings,
        *,
        transactional_id: str,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_wait_s: float = DEFAULT_POOL_WAIT_S,
        views: ViewReader | None = None,
        use_views: bool = True,
        kafka_in_background: bool = False,
    ) -> None:
        if settings.kafka_bootstrap is None or settings.redis_url is None:
            msg = "settings need kafka_bootstrap and redis_url (resolve them in the CLI)"
            raise ConfigurationError(msg)
        self.settings = settings
        prefix = settings.key_prefix
        self.endpoint = endpoint = redacted(settings.redis_url)
        self.redis = pooled_client(
            settings.redis_url,
            settings=settings,
            max_connections=max_connections,
            wait_s=pool_wait_s,
        )
        budget = settings.outage_budget_s
        self.leases = RedisLeaseStore(
            self.redis, key_prefix=prefix, endpoint=endpoint, outage_budget_s=budget
        )
        #: Which runs were ever opened (``Ledger.from_settings(..., runs=ports.runs)``).
        self.runs = RedisRunIndex(
            self.redis, key_prefix=prefix, endpoint=endpoint, outage_budget_s=budget
        )
        self.log = KafkaEventLog(settings, transactional_id=transactional_id, guard=self.leases)
        #: The projector's views in Redis, on the shared client (always there, for writers
        #: such as the reconciler that read and settle from them).
        self.store = RedisViewStore(
            self.redis, key_prefix=prefix, url=endpoint, outage_budget_s=budget
        )
        self.views: ViewReader | None = views or (self.store if use_views else None)
        if self.views is self.store and not is_cluster(self.redis):
            # a resume's claim reads the views' pointer along: its view read skips that trip
            self.runs.read_along(self.store.pointer_key, self.store.saw_pointer)
        self._kafka_in_background = kafka_in_background
        self._started = False
        self._stopped = False

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            # What the start opened is closed: a Redis check that passed beside a Kafka start
            # that failed left a live connection in the pool (DESIGN.md §11).
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Check Redis and connect the event log, the two beside each other (a fresh process's
        first resume waits for the slower, not for their sum). Redis's error is the one told
        when both fail; a log that started beside a failed check is stopped again.

        With ``kafka_in_background`` the start returns once Redis is checked: the log goes on
        connecting and each of its calls waits for it (and raises its error): a resume then
        reads the run index and the view from Redis while the producer starts (DESIGN.md §13,
        "Resume at the cost of its reads, session 14")."""
        if self._started:
            return
        self._started = True
        if self._kafka_in_background:
            self.log.start_soon()
        redis_checked, log_started = await asyncio.gather(
            ride_out(
                lambda: check_mode(self.redis, endpoint=self.endpoint),
                dependency="Redis",
                endpoint=self.endpoint,
                budget_s=self.settings.outage_budget_s,
            ),
            _nothing() if self._kafka_in_background else self.log.start(),
            return_exceptions=True,
        )
        if isinstance(redis_checked, BaseException):
            if not isinstance(log_started, BaseException):
                await self.log.stop()
            raise redis_checked
        if isinstance(log_started, BaseException):
            raise log_started

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


async def _nothing() -> None:
    """An awaitable that does nothing (the log's start when it goes on in the background)."""


class WorkerPorts(Ports):
    """:class:`Ports` of one worker process, shaped by its settings.

    With ``settings.use_views`` (default) resumes read the projector's Redis views, completed
    from Kafka where the projector is behind (``agentledger._core.loader``). The pool follows
    ``redis_max_connections`` and ``redis_pool_wait_s``; the producer's transactional id is
    ``settings.producer_id``.
    """

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        views: ViewReader | None = None,
        kafka_in_background: bool = False,
    ) -> None:
        super().__init__(
            settings,
            transactional_id=settings.producer_id,
            max_connections=settings.redis_max_connections,
            pool_wait_s=settings.redis_pool_wait_s,
            views=views,
            use_views=settings.use_views,
            kafka_in_background=kafka_in_background,
        )
        self.settings: WorkerSettings = settings
