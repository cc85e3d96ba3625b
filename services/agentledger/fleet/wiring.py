"""Ports for the ``runs`` commands: an operator's ledger (approve, reject, fork) and run reads."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from agentledger._core.ports import WorkerPorts
from agentledger.bus.reading import RunReader
from agentledger.errors import ConfigurationError
from agentledger.events.codec import EventCodec
from agentledger.events.topics import topic_names
from agentledger.fleet.settings import FleetSettings
from agentledger.fleet.stable import StableBarrier
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.views import RunView, fold
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Ledger

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")


@dataclass
class Operator:
    """A ledger that writes as ``worker_id`` (no providers), and the stable barrier."""

    ledger: Ledger
    barrier: StableBarrier


@asynccontextmanager
async def operator(settings: FleetSettings, who: str) -> AsyncIterator[Operator]:
    """A short-lived writer for decisions and forks, with its own transactional id."""
    name = _UNSAFE.sub("_", who)[:60] or "operator"
    worker_id = f"operator-{name}-{uuid.uuid4().hex[:6]}"
    scoped = settings.model_copy(update={"worker_id": worker_id, "transactional_id": None})
    async with AsyncExitStack() as stack:
        ports = await stack.enter_async_context(WorkerPorts(scoped))
        views = ports.views
        barrier = await stack.enter_async_context(
            StableBarrier(settings, timeout_s=settings.fleet_stable_timeout_s)
        )
        ledger = Ledger(
            log=ports.log,
            leases=ports.leases,
            providers={},
            views=views,
            worker_id=worker_id,
            lease_ttl_ms=settings.lease_ttl_ms,
            barrier_s=settings.resume_barrier_s,
        )
        yield Operator(ledger, barrier)


class RunLookup:
    """Reads runs for ``runs list|show``: Redis views first, Kafka's fold when the projector has
    not seen a run; leases for the owner. An async context manager."""

    def __init__(self, settings: FleetSettings) -> None:
        if settings.redis_url is None or settings.kafka_bootstrap is None:
            raise ConfigurationError("resolve the endpoints before reading runs")
        self._settings = settings
        self.views = RedisViewStore.from_url(
            settings.redis_url, key_prefix=settings.key_prefix, settings=settings
        )
        self.leases = RedisLeaseStore.from_settings(settings)
        self._reader = RunReader(
            settings.kafka_bootstrap,
            topic_names(settings).run_topics,
            EventCodec(),
            connect_timeout_ms=settings.kafka_connect_timeout_ms,
            read_timeout_ms=settings.kafka_publish_timeout_ms,
            settings=settings,
        )

    async def __aenter__(self) -> RunLookup:
        try:
            await self.views.__aenter__()
        except BaseException:
            await self.__aexit__()  # a refused check (a cluster node, say) left a connection
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._reader.stop()
        await self.leases.stop()
        await self.views.close()

    async def view(self, run_id: str) -> tuple[RunView | None, str]:
        """The run's view and where it came from (``views`` or ``log``); None if unknown."""
        found = await self.views.load(run_id)
        if found is not None:
            return found, "views"
        events = await self._reader.read_run(run_id, self._settings.run_partitions)
        if not events:
            return None, "log"
        return fold(RunView(run_id=run_id), events).view, "log"
