"""The lease port: one writer per run, proven by a fencing token that only ever grows."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass

from agentledger.bus.port import FenceGuard


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
    async def stale(self, fences: dict[str, int]) -> set[str]:
        """Of the given (run, fence) pairs, those whose lease is missing, expired or re-fenced."""
