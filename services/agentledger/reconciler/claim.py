"""Writing to a run as its lease holder: take the lease, read the latest view, release.

Run events are written only by the holder of the run's lease (DESIGN.md invariant 5), so the
reconciler takes the lease like any worker. The lease is also what keeps two reconciler
instances off the same run: whoever does not get it skips the run for this pass.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import structlog

from agentledger.bus.port import EventLog
from agentledger.errors import AgentLedgerError
from agentledger.leases import Lease, LeaseStore
from agentledger.views.model import RunView
from agentledger.views.store import ViewReader
from agentledger.worker.loader import load_view

_log = structlog.get_logger(__name__)


@dataclass
class Claim:
    """A held lease and the run's view as of after the previous writer's last commit."""

    lease: Lease
    view: RunView


class RunClaimer:
    """Takes run leases as ``owner`` and loads the latest view behind the resume barrier."""

    def __init__(
        self,
        log: EventLog,
        views: ViewReader,
        leases: LeaseStore,
        *,
        owner: str,
        ttl_ms: int,
        barrier_s: float,
    ) -> None:
        self.log = log
        self.views = views
        self.leases = leases
        self.owner = owner
        self._ttl_ms = ttl_ms
        self._barrier_s = barrier_s

    @asynccontextmanager
    async def claim(self, run_id: str, *, floor: int = 0) -> AsyncIterator[Claim]:
        """Hold the run's lease inside the block; LeaseHeldError if a live writer has it."""
        lease = await self.leases.acquire(run_id, self.owner, self._ttl_ms, floor=floor)
        try:
            loaded = await load_view(self.log, run_id, reader=self.views, barrier_s=self._barrier_s)
            view = loaded.view
            if view.fence >= lease.fence:
                # The lease store forgot fences (flushed) and the hint was stale: go above.
                lease = await self.leases.acquire(
                    run_id, self.owner, self._ttl_ms, floor=view.fence
                )
            yield Claim(lease, view)
        finally:
            try:
                await self.leases.release(lease)
            except AgentLedgerError as e:
                _log.warning("lease_release_failed", run_id=run_id, error=str(e))
