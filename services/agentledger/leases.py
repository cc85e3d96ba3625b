"""The lease port: one writer per run, proven by a fencing token that only ever grows."""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentledger.bus.port import FenceGuard, Holder
from agentledger.errors import LeaseHeldError


@dataclass(frozen=True)
class Lease:
    """Held by ``owner`` until ``expires_at`` (epoch ms); ``fence`` stamps every event it writes."""

    run_id: str
    owner: str
    fence: int
    expires_at: int


class LeaseStore(FenceGuard):
    """Acquire, renew and release run leases; the fence is bumped on every acquisition.

    A store is also a :class:`FenceGuard`: the event log asks it which writers are stale.
    The fence survives release and expiry; it is lost only if the store is wiped, which is why
    ``acquire`` takes a ``floor`` (the highest fence the caller saw in the run's events).
    """

    @abstractmethod
    async def acquire(self, run_id: str, owner: str, ttl_ms: int, *, floor: int = 0) -> Lease:
        """Take the lease if free, expired or already ``owner``'s, with fence
        max(stored fence, floor) + 1; else raise LeaseHeldError."""

    async def acquire_many(
        self, floors: Mapping[str, int], owner: str, ttl_ms: int
    ) -> dict[str, Lease | None]:
        """:meth:`acquire` for each run (run id -> floor); None where another owner holds it.

        Stores that can do it in one round trip override this."""

        async def one(run_id: str, floor: int) -> Lease | None:
            try:
                return await self.acquire(run_id, owner, ttl_ms, floor=floor)
            except LeaseHeldError:
                return None

        found = await asyncio.gather(*(one(r, f) for r, f in floors.items()))
        return dict(zip(floors, found, strict=True))

    async def release_many(self, leases: Sequence[Lease]) -> None:
        """:meth:`release` each lease (stores that can do it in one round trip override this)."""
        await asyncio.gather(*(self.release(lease) for lease in leases))

    @abstractmethod
    async def renew(self, lease: Lease, ttl_ms: int) -> Lease:
        """Extend a live lease still held with the same owner and fence; else StaleFenceError."""

    @abstractmethod
    async def release(self, lease: Lease) -> None:
        """Give the lease up if still held with this fence (idempotent); the fence is kept."""

    @abstractmethod
    async def current(self, run_id: str) -> Lease | None:
        """The live lease of the run, or None if free or expired."""

    @abstractmethod
    async def stale(self, claims: dict[str, Holder]) -> set[str]:
        """Of the given (run, holder) claims, those whose lease is missing, expired, re-fenced
        or held by another owner (the same fence can be granted twice after a failover)."""
