"""The lease keeper starts its renewal task only when the first renewal is due."""

from __future__ import annotations

import asyncio

from agentledger.leases import Lease
from agentledger.leasing import LeaseKeeper, MemoryLeaseStore


class CountingStore(MemoryLeaseStore):
    """A memory lease store that counts renewals and says when ``wanted`` were made."""

    def __init__(self, wanted: int) -> None:
        super().__init__()
        self.renewals = 0
        self.wanted = wanted
        self.enough = asyncio.Event()

    async def renew(self, lease: Lease, ttl_ms: int) -> Lease:
        self.renewals += 1
        if self.renewals >= self.wanted:
            self.enough.set()
        return await super().renew(lease, ttl_ms)


def keeper_tasks() -> set[asyncio.Task[object]]:
    return {t for t in asyncio.all_tasks() if t.get_name().startswith("lease-keeper:")}


async def test_a_keeper_left_before_its_first_renewal_starts_no_task_and_releases() -> None:
    """Entered and left within one interval, a keeper starts no task, renews nothing and
    releases the lease."""
    store = CountingStore(wanted=1)
    lease = await store.acquire("run-short", "w-1", 30_000)
    async with LeaseKeeper(store, lease, 30_000):
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not keeper_tasks()
    assert store.renewals == 0
    assert await store.current("run-short") is None
    assert not keeper_tasks()


async def test_a_keeper_kept_past_its_interval_renews_again_and_again() -> None:
    """Past the first interval the keeper renews, keeps the fence, and goes on renewing until
    it is left; then its task is gone and the lease released."""
    store = CountingStore(wanted=3)
    lease = await store.acquire("run-long", "w-1", 30_000)
    async with asyncio.timeout(30):
        async with LeaseKeeper(store, lease, 30_000, interval_ms=1) as keeper:
            await store.enough.wait()
            assert len(keeper_tasks()) == 1
            assert keeper.lease.fence == lease.fence
            assert not keeper.lost.is_set()
    assert store.renewals >= 3
    assert await store.current("run-long") is None
    assert not keeper_tasks()
