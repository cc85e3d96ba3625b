"""Writing to runs as their lease holder: take the leases, read the latest views, release.

Run events are written only by the holder of the run's lease (DESIGN.md invariant 5), so the
reconciler takes the lease like any worker. The lease is also what keeps two reconciler
instances off the same run: whoever does not get it skips the run for this pass.

Leases are taken for a batch of runs at once, then one resume barrier covers the whole batch:
the views are read only once the projector has applied everything up to the end offsets taken
after the leases were acquired, so a view never misses what the previous holder committed. If
the projector does not catch up in time, each run is folded from the log instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

import structlog

from agentledger._core.loader import fold_log, load_view
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import EventLog, Position
from agentledger.errors import AgentLedgerError, LeaseHeldError
from agentledger.leases import Lease, LeaseStore
from agentledger.views.model import RunView
from agentledger.views.store import ViewReader

_log = structlog.get_logger(__name__)
_POLL_S = 0.02


@dataclass
class Claim:
    """A held lease and the run's view as of after the previous writer's last commit."""

    lease: Lease
    view: RunView


@dataclass
class Claims:
    """The runs of a batch this claimer holds, and those a live writer held."""

    held: dict[str, Claim] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)


class RunClaimer:
    """Takes run leases as ``owner`` and loads the latest views behind the resume barrier."""

    def __init__(
        self,
        log: EventLog,
        views: ViewReader,
        leases: LeaseStore,
        *,
        owner: str,
        ttl_ms: int,
        barrier_s: float,
        partitions: int,
        io_concurrency: int = 32,
    ) -> None:
        self.log = log
        self.views = views
        self.leases = leases
        self.owner = owner
        self._ttl_ms = ttl_ms
        self._barrier_s = barrier_s
        self._partitions = partitions
        # Bounds the per-run reads of a batch whose views are behind (a connection each).
        self._io = asyncio.Semaphore(io_concurrency)

    @asynccontextmanager
    async def claim(self, run_id: str, *, floor: int = 0) -> AsyncIterator[Claim]:
        """Hold one run's lease inside the block; LeaseHeldError if a live writer has it."""
        async with self.claim_many({run_id: floor}) as claims:
            if run_id not in claims.held:
                msg = "another writer holds the run's lease"
                raise LeaseHeldError(msg, run_id=run_id)
            yield claims.held[run_id]

    @asynccontextmanager
    async def claim_many(self, floors: Mapping[str, int]) -> AsyncIterator[Claims]:
        """Hold the leases of the runs a live writer does not hold; release them on exit."""
        claims = Claims()
        leases: dict[str, Lease] = {}
        renewing: asyncio.Task[None] | None = None
        try:
            outcomes = await self.leases.acquire_many(floors, self.owner, self._ttl_ms)
            for run_id, lease in outcomes.items():
                if lease is None:
                    claims.refused.append(run_id)
                else:
                    leases[run_id] = lease
            if leases:
                renewing = asyncio.get_running_loop().create_task(self._renew(leases))
                caught_up = await self._barrier(list(leases))
                stored = await self.views.load_many(list(leases)) if caught_up else {}
                views = await asyncio.gather(
                    *(self._latest(run_id, caught_up, stored.get(run_id)) for run_id in leases)
                )
                for run_id, view in zip(list(leases), views, strict=True):
                    lease = leases[run_id]
                    if view.fence >= lease.fence:
                        # The lease store forgot fences (flushed) and the hint was stale.
                        lease = leases[run_id] = await self.leases.acquire(
                            run_id, self.owner, self._ttl_ms, floor=view.fence
                        )
                    claims.held[run_id] = Claim(lease, view)
            yield claims
        finally:
            if renewing is not None:
                renewing.cancel()
                with suppress(asyncio.CancelledError):
                    await renewing
            await self._release(list(leases.values()))

    async def _renew(self, leases: dict[str, Lease]) -> None:
        """Keep the batch's leases alive while slow providers are being asked."""
        while True:
            await asyncio.sleep(self._ttl_ms / 3000)
            for run_id, lease in list(leases.items()):
                try:
                    leases[run_id] = await self.leases.renew(lease, self._ttl_ms)
                except AgentLedgerError as e:
                    # The write will be refused by the fence guard; nothing else to do here.
                    _log.warning("lease_renew_failed", run_id=run_id, error=str(e))

    async def _release(self, leases: list[Lease]) -> None:
        if not leases:
            return
        try:
            await self.leases.release_many(leases)
        except AgentLedgerError as e:
            # expiry frees them in ttl_ms; the next claim of these runs waits that long at most
            _log.warning("lease_release_failed", runs=[x.run_id for x in leases], error=str(e))

    async def _barrier(self, run_ids: list[str]) -> bool:
        """Wait until the views cover every run's partitions; False when they did not in time."""
        one_per_partition: dict[int, str] = {}
        for run_id in run_ids:
            one_per_partition.setdefault(partition_for(run_key(run_id), self._partitions), run_id)
        positions: list[Position] = []
        for run_id in one_per_partition.values():
            positions += await self.log.run_end_positions(run_id)
        deadline = time.monotonic() + self._barrier_s
        while not await self.views.progress(positions):
            if time.monotonic() >= deadline:
                _log.warning("views_behind", runs=len(run_ids), barrier_s=self._barrier_s)
                return False
            await asyncio.sleep(_POLL_S)
        return True

    async def _latest(self, run_id: str, caught_up: bool, stored: RunView | None) -> RunView:
        if caught_up:
            if stored is not None:
                return stored
            return await fold_log(self.log, run_id)
        # Views behind: the run's view plus the events the projector has not applied yet.
        async with self._io:
            return (await load_view(self.log, run_id, reader=self.views)).view
