"""Writing to runs as their lease holder: take the leases, read the latest views, release.

Run events are written only by the holder of the run's lease (DESIGN.md invariant 5), so the
reconciler takes the lease like any worker. The lease is also what keeps two reconciler
instances off the same run: whoever does not get it skips the run for this pass.

Leases are taken for a batch of runs at once, then the end offsets of the batch's partitions
are read (after the leases were acquired, so they cover the previous holder's last commit), and
the views are read with the projector's progress in one round trip. A caller's ``lane`` bounds
only the first two steps (leases and end offsets), its ``turn`` says when the last two (the wait
for the projector and the view read) happen (claim-ahead, DESIGN.md §19). A run whose partitions the
projector has reached is used as stored; any other run is completed with its events from that
progress on (the log's tail, shared by the batch's reads) instead of waiting for the projector
to apply other runs' writes. ``barrier_s`` > 0 first gives the projector that long to catch up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext, suppress
from dataclasses import dataclass, field

import structlog

from agentledger._core.loader import fold_log
from agentledger.bus.port import EventLog, Position
from agentledger.errors import AgentLedgerError, LeaseHeldError
from agentledger.leases import Lease, LeaseStore
from agentledger.views import fold
from agentledger.views.model import RunView
from agentledger.views.store import ViewAt, ViewReader

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
        io_concurrency: int = 32,
    ) -> None:
        self.log = log
        self.views = views
        self.leases = leases
        self.owner = owner
        self._ttl_ms = ttl_ms
        self._barrier_s = barrier_s
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
    async def claim_many(
        self,
        floors: Mapping[str, int],
        *,
        lane: AbstractAsyncContextManager[object] | None = None,
        turn: Callable[[int], AbstractAsyncContextManager[object]] | None = None,
        only: Collection[str] | None = None,
    ) -> AsyncIterator[Claims]:
        """Hold the leases of the runs a live writer does not hold; release them on exit.

        ``lane`` is held while the leases are taken and the end offsets read; ``turn(n)``, for
        the ``n`` runs leased, is entered after that and held while the projector is waited for
        and the views are read.
        A caller bounds with the first how many batches take leases at once, and with the second
        when a batch claimed ahead reads its views: the end offsets are those read after the
        leases were taken, so a view read later is as complete (the projector has gone further,
        and only this holder writes the run meanwhile).

        ``only`` names the run fields the caller reads: the views of runs the projector has
        reached are then brief (those fields and the effects, no steps; DESIGN.md §19), the
        others are read whole and completed from the log as always."""
        claims = Claims()
        leases: dict[str, Lease] = {}
        renewing: asyncio.Task[None] | None = None
        try:
            async with lane or nullcontext():
                outcomes = await self.leases.acquire_many(floors, self.owner, self._ttl_ms)
                for run_id, lease in outcomes.items():
                    if lease is None:
                        claims.refused.append(run_id)
                    else:
                        leases[run_id] = lease
                ends = await self._ends(list(leases)) if leases else {}
            if leases:
                renewing = asyncio.get_running_loop().create_task(self._renew(leases))
                async with nullcontext() if turn is None else turn(len(leases)):
                    views = await self._latest_many(list(leases), ends, only)
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

    async def _ends(self, run_ids: list[str]) -> dict[str, list[Position]]:
        """The end offsets of each run's partitions, read after its lease was taken: one
        ListOffsets round for the whole batch (concurrent callers share it)."""
        return await self.log.runs_end_positions(run_ids)

    async def _latest_many(
        self,
        run_ids: list[str],
        ends: Mapping[str, list[Position]],
        only: Collection[str] | None = None,
    ) -> list[RunView]:
        """Each run's view with every event committed before its lease was taken.

        ``ends`` are the end offsets of the batch's partitions (read after the leases were
        taken); the projector is given up to ``barrier_s`` to reach them, then the views are
        read with the progress they are complete up to, in one round trip. A run whose
        partitions the projector has not reached (or that has events parked behind a gap) is
        completed with its events from that progress on: a short read of the log's tail, shared
        by the runs of the batch, instead of waiting for the projector to apply other runs'
        writes.
        """
        furthest: dict[tuple[str, int], Position] = {}
        for positions in ends.values():
            for p in positions:
                tp = (p.topic, p.partition)
                if tp not in furthest or furthest[tp].offset < p.offset:
                    furthest[tp] = p
        if self._barrier_s > 0:
            await self._barrier(list(furthest.values()), len(run_ids))
        partitions = {r: [(p.topic, p.partition) for p in ends[r]] for r in run_ids}
        found = await self.views.load_many_at(partitions, only=only)

        async def one(run_id: str) -> RunView:
            if found is None:  # no projector here (or a rebuild was swapped in while reading)
                async with self._io:
                    return await fold_log(self.log, run_id)
            at, mine = found[run_id], ends[run_id]
            if _complete(at, mine):
                return at.view or RunView(run_id=run_id)
            async with self._io:
                if only is not None:
                    # A brief view is no base to fold the tail onto: read this one whole.
                    whole = await self.views.load_at(run_id, partitions[run_id])
                    if whole is None:
                        return await fold_log(self.log, run_id)
                    at = whole
                    if _complete(at, mine):
                        return at.view or RunView(run_id=run_id)
                tail = await self.log.read_run(run_id, since=at.progress)
                result = fold(at.view or RunView(run_id=run_id), [*at.parked, *tail], in_place=True)
                if result.parked:  # the log itself has a gap there: let the whole fold say so
                    return await fold_log(self.log, run_id)
                return result.view

        if found is not None:
            # The common case, a run the projector has reached, needs no task of its own.
            ready = {r: found[r] for r in run_ids if _complete(found[r], ends[r])}
            if len(ready) < len(run_ids):
                rest = [r for r in run_ids if r not in ready]
                late = dict(zip(rest, await asyncio.gather(*(one(r) for r in rest)), strict=True))
            else:
                late = {}
            return [
                late[r] if r not in ready else ready[r].view or RunView(run_id=r) for r in run_ids
            ]
        return list(await asyncio.gather(*(one(r) for r in run_ids)))

    async def _barrier(self, positions: list[Position], runs: int) -> bool:
        """Wait until the views cover ``positions``; False when they did not in time."""
        deadline = time.monotonic() + self._barrier_s
        while not await self.views.progress(positions):
            if time.monotonic() >= deadline:
                _log.debug("views_behind", runs=runs, barrier_s=self._barrier_s)
                return False
            await asyncio.sleep(_POLL_S)
        return True


def _complete(at: ViewAt, ends: list[Position]) -> bool:
    """The view read holds every event below ``ends``, with nothing parked behind a gap."""
    return at.covers(ends) and not at.parked
