"""The lease contract: every LeaseStore (memory, Redis) and the LeaseKeeper on top pass these."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest

from agentledger.bus.memory import MemoryEventLog
from agentledger.bus.port import Holder
from agentledger.errors import LeaseHeldError, StaleFenceError
from agentledger.events import StepStarted
from agentledger.leases import LeaseStore
from agentledger.leasing import LeaseKeeper, MemoryLeaseStore
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.settings import CommonSettings

LONG = 60_000


Restore = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class LeaseEnv:
    """A store, a way to wipe it as FLUSHALL would, and a way to snapshot one run's lease and
    later put the snapshot back (as a failover to a replica that missed the writes since)."""

    store: LeaseStore
    flush: Callable[[], Awaitable[None]]
    snapshot: Callable[[str], Awaitable[Restore]]


@contextlib.asynccontextmanager
async def lease_env(settings: CommonSettings | None) -> AsyncIterator[LeaseEnv]:
    """A fresh in-memory store if ``settings`` is None, else Redis under the test's prefix."""
    if settings is None:
        memory = MemoryLeaseStore()

        async def flush_memory() -> None:
            memory.flush()

        async def snapshot_memory(run: str) -> Restore:
            slots = memory._slots  # the test plays the failover that loses writes
            kept = copy.copy(slots.get(run))

            async def restore() -> None:
                if kept is None:
                    slots.pop(run, None)
                else:
                    slots[run] = copy.copy(kept)

            return restore

        yield LeaseEnv(memory, flush_memory, snapshot_memory)
        return
    async with RedisLeaseStore.from_settings(settings) as redis_store:

        async def flush_prefix() -> None:
            await redis_store.forget_all()

        async def snapshot_redis(run: str) -> Restore:
            client = redis_store._client  # the test plays the failover
            key = redis_store.key(run)
            kept = await client.hgetall(key)

            async def restore() -> None:
                await client.delete(key)
                if kept:
                    await client.hset(key, mapping=kept)
                    await client.pexpire(key, LONG)

            return restore

        yield LeaseEnv(redis_store, flush_prefix, snapshot_redis)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.integration)])
def backend(request: pytest.FixtureRequest) -> CommonSettings | None:
    """None for the in-memory store, else this test's settings on the real Redis."""
    if request.param == "memory":
        return None
    settings: CommonSettings = request.getfixturevalue("ledger_settings")
    return settings


@pytest.fixture
async def env(backend: CommonSettings | None) -> AsyncIterator[LeaseEnv]:
    """One store per test."""
    async with lease_env(backend) as built:
        yield built


def run_id() -> str:
    """A run id unique to this test (with characters that need the hash tag's braces)."""
    return f"run:{uuid.uuid4().hex[:12]}"


async def expire(ttl_ms: int) -> None:
    """Let a lease of ``ttl_ms`` run out (stores use their own clock: wait past it)."""
    await asyncio.sleep(ttl_ms / 1000 + 0.05)


async def test_first_acquire_gets_fence_one_and_is_current(env: LeaseEnv) -> None:
    """A never-leased run is acquired with fence 1 and reported as the live lease."""
    run = run_id()
    lease = await env.store.acquire(run, "w-1", LONG)
    assert (lease.run_id, lease.owner, lease.fence) == (run, "w-1", 1)
    assert await env.store.current(run) == lease


async def test_live_lease_refuses_another_owner(env: LeaseEnv) -> None:
    """A second worker cannot take a live lease; the error names the run."""
    run = run_id()
    await env.store.acquire(run, "w-1", LONG)
    with pytest.raises(LeaseHeldError) as err:
        await env.store.acquire(run, "w-2", LONG)
    assert err.value.run_id == run
    assert "w-1" in str(err.value)


async def test_same_owner_reacquires_with_a_new_fence(env: LeaseEnv) -> None:
    """A restarted worker with the same id takes its run back at once, under a higher fence."""
    run = run_id()
    first = await env.store.acquire(run, "w-1", LONG)
    second = await env.store.acquire(run, "w-1", LONG)
    assert second.fence == first.fence + 1
    assert await env.store.stale({run: Holder(first.fence, "w-1")}) == {run}


async def test_expired_lease_goes_to_the_next_owner_and_fences_the_old(env: LeaseEnv) -> None:
    """After expiry another worker acquires with fence+1; the old holder can no longer renew."""
    run = run_id()
    old = await env.store.acquire(run, "w-1", 100)
    await expire(100)
    assert await env.store.current(run) is None
    new = await env.store.acquire(run, "w-2", LONG)
    assert new.fence == old.fence + 1
    with pytest.raises(StaleFenceError):
        await env.store.renew(old, LONG)
    assert await env.store.stale({run: Holder(old.fence, old.owner)}) == {run}
    assert await env.store.stale({run: Holder(new.fence, new.owner)}) == set()


async def test_expired_lease_cannot_be_renewed_even_unclaimed(env: LeaseEnv) -> None:
    """Renewal after expiry fails even if nobody took the run: others may already act on it."""
    run = run_id()
    lease = await env.store.acquire(run, "w-1", 100)
    await expire(100)
    with pytest.raises(StaleFenceError):
        await env.store.renew(lease, LONG)


async def test_renew_extends_the_lease(env: LeaseEnv) -> None:
    """A renewed lease outlives its first ttl with the same fence."""
    run = run_id()
    lease = await env.store.acquire(run, "w-1", 300)
    renewed = await env.store.renew(lease, LONG)
    assert renewed.fence == lease.fence
    assert renewed.expires_at > lease.expires_at
    await expire(300)
    assert await env.store.current(run) == renewed


async def test_release_frees_the_run_but_keeps_the_fence(env: LeaseEnv) -> None:
    """After release the run is free, the next fence is still higher, and release is idempotent."""
    run = run_id()
    lease = await env.store.acquire(run, "w-1", LONG)
    await env.store.release(lease)
    await env.store.release(lease)
    assert await env.store.current(run) is None
    assert await env.store.stale({run: Holder(lease.fence, lease.owner)}) == {run}
    again = await env.store.acquire(run, "w-2", LONG)
    assert again.fence == lease.fence + 1


async def test_stale_release_does_not_free_the_new_holder(env: LeaseEnv) -> None:
    """A zombie releasing its old lease leaves the current holder's lease alone."""
    run = run_id()
    old = await env.store.acquire(run, "w-1", LONG)
    new = await env.store.acquire(run, "w-1", LONG)
    await env.store.release(old)
    assert await env.store.current(run) == new


async def test_floor_keeps_fences_growing_after_a_flush(env: LeaseEnv) -> None:
    """With the store wiped, acquire(floor=highest fence in the log) still yields a higher fence."""
    run = run_id()
    for _ in range(3):
        lease = await env.store.acquire(run, "w-1", LONG)
    assert lease.fence == 3
    await env.flush()
    assert await env.store.current(run) is None
    after = await env.store.acquire(run, "w-2", LONG, floor=lease.fence)
    assert after.fence == 4


async def test_stored_fence_wins_over_a_lower_floor(env: LeaseEnv) -> None:
    """A floor below the stored fence does not lower it."""
    run = run_id()
    for _ in range(3):
        await env.store.acquire(run, "w-1", LONG)
    assert (await env.store.acquire(run, "w-1", LONG, floor=1)).fence == 4


async def test_stale_answers_for_many_runs_at_once(env: LeaseEnv) -> None:
    """stale() sorts live, re-fenced, released, expired and never-leased runs in one call."""
    live = [run_id() for _ in range(10)]
    refenced = [run_id() for _ in range(5)]
    released = [run_id() for _ in range(5)]
    expired = [run_id() for _ in range(5)]
    missing = [run_id() for _ in range(5)]
    fences: dict[str, Holder] = {}
    for run in live:
        fences[run] = Holder((await env.store.acquire(run, "w-1", LONG)).fence, "w-1")
    for run in refenced:
        fences[run] = Holder((await env.store.acquire(run, "w-1", LONG)).fence, "w-1")
        await env.store.acquire(run, "w-1", LONG)
    for run in released:
        lease = await env.store.acquire(run, "w-1", LONG)
        fences[run] = Holder(lease.fence, "w-1")
        await env.store.release(lease)
    for run in expired:
        fences[run] = Holder((await env.store.acquire(run, "w-1", 100)).fence, "w-1")
    for run in missing:
        fences[run] = Holder(1, "w-1")
    await expire(100)
    assert await env.store.stale(fences) == {*refenced, *released, *expired, *missing}
    assert await env.store.stale({}) == set()


async def test_keeper_holds_the_lease_beyond_its_ttl(env: LeaseEnv) -> None:
    """Inside the keeper a short lease stays live past several ttls, with the same fence."""
    run = run_id()
    lease = await env.store.acquire(run, "w-1", 400)
    async with LeaseKeeper(env.store, lease, 400, interval_ms=50) as keeper:
        await asyncio.sleep(1.0)
        assert not keeper.lost.is_set()
        current = await env.store.current(run)
        assert current is not None
        assert current.fence == lease.fence
        assert keeper.lease.expires_at > lease.expires_at
    assert await env.store.current(run) is None  # released on exit


async def test_keeper_reports_a_lost_lease(env: LeaseEnv) -> None:
    """When another writer takes the run over, the keeper sets ``lost`` and does not release."""
    run = run_id()
    lease = await env.store.acquire(run, "w-1", LONG)
    async with LeaseKeeper(env.store, lease, LONG, interval_ms=20) as keeper:
        usurper = await env.store.acquire(run, "w-1", LONG)
        await asyncio.wait_for(keeper.lost.wait(), timeout=10)
        with pytest.raises(StaleFenceError):
            keeper.ensure_held()
    assert await env.store.current(run) == usurper


async def test_acquire_many_takes_the_free_runs_and_skips_the_held(env: LeaseEnv) -> None:
    """Leases taken together: free runs get fence floor + 1, a run another owner holds is None,
    and releasing them together frees exactly those taken."""
    free, held, floored = run_id(), run_id(), run_id()
    other = await env.store.acquire(held, "w-other", LONG)
    got = await env.store.acquire_many({free: 0, held: 0, floored: 7}, "rec-1", LONG)
    assert got[held] is None
    taken = [lease for lease in got.values() if lease is not None]
    assert sorted((x.run_id, x.owner, x.fence) for x in taken) == sorted(
        [(free, "rec-1", 1), (floored, "rec-1", 8)]
    )
    await env.store.release_many(taken)
    assert await env.store.current(free) is None
    assert await env.store.current(floored) is None
    assert await env.store.current(held) == other


async def test_same_fence_different_owner_is_stale(env: LeaseEnv) -> None:
    """A claim of the live lease's fence by another owner is stale; the holder's is live."""
    run = run_id()
    lease = await env.store.acquire(run, "w-1", LONG)
    assert await env.store.stale({run: Holder(lease.fence, "w-2")}) == {run}
    assert await env.store.stale({run: Holder(lease.fence, "w-1")}) == set()


async def test_same_fence_different_owner_is_stale_among_many_runs(env: LeaseEnv) -> None:
    """Asked about many runs in one call (a group commit), a claim of a live fence by another
    owner is stale and the holders' claims are live."""
    runs = [run_id() for _ in range(4)]
    leases = [await env.store.acquire(run, "w-1", LONG) for run in runs]
    claims = {x.run_id: Holder(x.fence, "w-2" if i % 2 else "w-1") for i, x in enumerate(leases)}
    assert await env.store.stale(claims) == {runs[1], runs[3]}


def step(run: str, fence: int, worker: str) -> StepStarted:
    """A run event written by ``worker`` under ``fence``."""
    return StepStarted(
        run_id=run, seq=1, fence=fence, worker_id=worker, step=0, step_name="s", attempt=1
    )


async def test_writer_whose_acquisition_a_failover_lost_is_refused(env: LeaseEnv) -> None:
    """A acquires fence f, a failover rewinds the lease to before that, B acquires and is granted
    f too: A's next commit is refused as stale and B's commits (DESIGN.md §15)."""
    run = run_id()
    await env.store.release(await env.store.acquire(run, "w-prev", LONG))  # fence f - 1, free
    rewind = await env.snapshot(run)
    a = await env.store.acquire(run, "w-a", LONG)
    await rewind()  # the promoted replica never saw A's acquisition
    b = await env.store.acquire(run, "w-b", LONG)
    assert b.fence == a.fence  # the same fence, granted twice
    log = MemoryEventLog(guard=env.store)
    with pytest.raises(StaleFenceError) as err:
        await log.publish([step(run, a.fence, a.owner)])
    assert err.value.run_id == run
    await log.publish([step(run, b.fence, b.owner)])
    assert [(e.fence, e.worker_id) for e in await log.read_run(run)] == [(b.fence, "w-b")]


async def test_acquisitions_and_releases_made_together_each_get_their_own_answer(
    env: LeaseEnv,
) -> None:
    """Runs acquired at once (one batch on Redis) each get their lease, a run held by another
    owner refuses only its caller, twice the same run gets two fences, and releases made
    together free each run."""
    runs = [run_id() for _ in range(20)]
    held = run_id()
    await env.store.acquire(held, "other", LONG)
    twice = runs[0]
    answers = await asyncio.gather(
        *(env.store.acquire(r, "w-1", LONG, floor=i) for i, r in enumerate(runs)),
        env.store.acquire(held, "w-1", LONG),
        env.store.acquire(twice, "w-1", LONG),
        return_exceptions=True,
    )
    leases, refused, again = answers[: len(runs)], answers[len(runs)], answers[-1]
    for i, (r, lease) in enumerate(zip(runs, leases, strict=True)):
        assert not isinstance(lease, BaseException), lease
        assert (lease.run_id, lease.owner) == (r, "w-1")
        assert lease.fence == (i + 1 if r != twice else lease.fence)
    assert isinstance(refused, LeaseHeldError)
    assert refused.run_id == held
    assert not isinstance(again, BaseException)
    assert {again.fence, leases[0].fence} == {1, 2}  # type: ignore[union-attr]
    last = max((again, leases[0]), key=lambda x: x.fence)  # type: ignore[union-attr]
    await asyncio.gather(*(env.store.release(x) for x in [last, *leases[1:]]))
    for r in runs:
        assert await env.store.current(r) is None
    assert (await env.store.current(held)) is not None
