"""Lease key layout and the in-memory store's injectable clock."""

from __future__ import annotations

import pytest

from agentledger.errors import LeaseHeldError, StaleFenceError
from agentledger.leasing import MemoryLeaseStore, lease_key
from agentledger.redisclient import redacted


def test_lease_key_uses_the_run_as_hash_tag() -> None:
    """The lease of run-1 under prefix al is al:{run-1}:lease (one Redis Cluster slot per run)."""
    assert lease_key("al", "run-1") == "al:{run-1}:lease"


def test_run_ids_with_braces_get_a_digest_tag() -> None:
    """A run id with braces cannot cut the hash tag short: it is replaced by a stable digest."""
    key = lease_key("al", "a}b")
    assert key == lease_key("al", "a}b")
    assert key.startswith("al:{h")
    assert key.endswith("}:lease")
    assert key.count("{") == 1
    assert key.count("}") == 1


def test_redis_password_is_not_shown() -> None:
    """Error messages name the Redis endpoint without its password."""
    assert redacted("redis://u:secret@host:6379/0") == "redis://u:***@host:6379/0"
    assert redacted("redis://host:6379/0") == "redis://host:6379/0"


async def test_memory_store_expires_by_its_clock() -> None:
    """With an injected clock, expiry happens exactly when the clock passes expires_at."""
    now = [1_000]
    store = MemoryLeaseStore(clock=lambda: now[0])
    lease = await store.acquire("r", "w-1", 100)
    assert lease.expires_at == 1_100
    now[0] = 1_099
    with pytest.raises(LeaseHeldError):
        await store.acquire("r", "w-2", 100)
    now[0] = 1_100
    assert await store.current("r") is None
    with pytest.raises(StaleFenceError):
        await store.renew(lease, 100)
    assert (await store.acquire("r", "w-2", 100)).fence == 2
