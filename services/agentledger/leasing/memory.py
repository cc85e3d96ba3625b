"""In-memory leases with an injectable clock: same semantics as Redis, for unit tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agentledger.bus.port import Holder
from agentledger.errors import ConfigurationError, LeaseHeldError, StaleFenceError
from agentledger.events.models import now_ms
from agentledger.leases import Lease, LeaseStore


@dataclass
class _Slot:
    owner: str
    fence: int
    expires_at: int


class MemoryLeaseStore(LeaseStore):
    """Leases in a dict; ``clock`` (epoch ms) decides expiry; ``flush()`` forgets every fence."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self._clock = clock
        self._slots: dict[str, _Slot] = {}

    def flush(self) -> None:
        """Forget everything, as FLUSHALL does to Redis."""
        self._slots.clear()

    async def acquire(self, run_id: str, owner: str, ttl_ms: int, *, floor: int = 0) -> Lease:
        """Take the lease if free, expired or ``owner``'s, with a fence above stored and floor."""
        _check_ttl(ttl_ms)
        now = self._clock()
        slot = self._slots.get(run_id)
        if slot is not None and slot.expires_at > now and slot.owner and slot.owner != owner:
            msg = f"held by {slot.owner} (fence {slot.fence}) for {slot.expires_at - now} ms more"
            raise LeaseHeldError(msg, run_id=run_id)
        fence = max(slot.fence if slot else 0, floor) + 1
        self._slots[run_id] = _Slot(owner, fence, now + ttl_ms)
        return Lease(run_id, owner, fence, now + ttl_ms)

    async def renew(self, lease: Lease, ttl_ms: int) -> Lease:
        """Extend the lease if it is still live with the same owner and fence."""
        _check_ttl(ttl_ms)
        now = self._clock()
        slot = self._slots.get(lease.run_id)
        if slot is None or not _holds(slot, lease, now):
            raise StaleFenceError(
                f"lease of {lease.owner} with fence {lease.fence} is lost", run_id=lease.run_id
            )
        slot.expires_at = now + ttl_ms
        return Lease(lease.run_id, lease.owner, lease.fence, slot.expires_at)

    async def release(self, lease: Lease) -> None:
        """Expire the lease now if still held with this fence; keep the fence."""
        slot = self._slots.get(lease.run_id)
        if slot is not None and slot.owner == lease.owner and slot.fence == lease.fence:
            slot.owner = ""
            slot.expires_at = 0

    async def current(self, run_id: str) -> Lease | None:
        """The live lease of the run, or None."""
        slot = self._slots.get(run_id)
        if slot is None or not slot.owner or slot.expires_at <= self._clock():
            return None
        return Lease(run_id, slot.owner, slot.fence, slot.expires_at)

    async def stale(self, claims: dict[str, Holder]) -> set[str]:
        """Runs whose lease is missing, expired or has another fence or owner."""
        now = self._clock()
        stale = set()
        for run_id, (fence, owner) in claims.items():
            slot = self._slots.get(run_id)
            if slot is None or not _holds(slot, Lease(run_id, owner, fence, 0), now):
                stale.add(run_id)
        return stale


def _holds(slot: _Slot, lease: Lease, now: int) -> bool:
    return slot.owner == lease.owner and slot.fence == lease.fence and slot.expires_at > now


def _check_ttl(ttl_ms: int) -> None:
    if ttl_ms <= 0:
        msg = f"a lease ttl must be positive, got {ttl_ms} ms (check the lease ttl setting)"
        raise ConfigurationError(msg)
