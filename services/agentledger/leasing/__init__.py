"""Run leases: the in-memory and Redis stores and the keeper that renews a held lease."""

from __future__ import annotations

from agentledger.leases import Lease, LeaseStore
from agentledger.leasing.keeper import LeaseKeeper
from agentledger.leasing.memory import MemoryLeaseStore
from agentledger.leasing.redis_store import RedisLeaseStore, lease_key

__all__ = ["Lease", "LeaseKeeper", "LeaseStore", "MemoryLeaseStore", "RedisLeaseStore", "lease_key"]
