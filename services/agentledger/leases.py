"""The lease port: one writer per run, proven by a fencing token that only ever grows."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


@dataclass(frozen=True)
class Lease:
    """Held by ``owner`` until ``expires_at`` (epoch ms); ``fence`` stamps every event it writes."""

    run_id: str
    owner: str
    fence: int
    expires_at: int


class LeaseStore(ABC):
    """Acquire, renew and release run leases; the fence is bumped on every acquisition."""

    @abstractmethod
    async def acquire(self, run_id: str, owner: str, ttl_ms: int) -> Lease:
        """Take the lease if free or expired (new, higher fence); else raise LeaseHeldError."""

    @abstractmethod
    async def renew(self, lease: Lease, ttl_ms: int) -> Lease:
        """Extend a lease still held with the same fence; else raise StaleFenceError."""

    @abstractmethod
    async def release(self, lease: Lease) -> None:
        """Give the lease up if still held with this fence (idempotent)."""

    @abstractmethod
    async def current(self, run_id: str) -> Lease | None:
        """The live lease of the run, or None if free or expired."""

    @abstractmethod
    async def stale(self, fences: dict[str, int]) -> set[str]:
        """Of the given (run, fence) pairs, those whose fence is no longer the live lease's."""
