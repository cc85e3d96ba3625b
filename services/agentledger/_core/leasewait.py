"""Taking a run's lease, waiting a bounded time for a previous holder (maybe dead) to let go."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from agentledger.errors import LeaseHeldError
from agentledger.leases import Lease, LeaseStore

_FIRST_DELAY_S = 0.02
_MAX_DELAY_S = 0.5


async def acquire_waiting(
    leases: LeaseStore,
    run_id: str,
    owner: str,
    ttl_ms: int,
    *,
    floor: int,
    wait_s: float,
    log: Any,
) -> Lease:
    """The lease of ``run_id``; while another holder has it, retry for up to ``wait_s``.

    A holder that died keeps the lease until its ttl runs out, so a resume in a new process
    right after a crash waits for that instead of failing; the wait is said once, in one log
    line (``lease_wait``). Past ``wait_s`` (0: do not wait) the LeaseHeldError is raised.
    """
    deadline = time.monotonic() + wait_s
    delay = _FIRST_DELAY_S
    said = False
    while True:
        try:
            lease = await leases.acquire(run_id, owner, ttl_ms, floor=floor)
        except LeaseHeldError as e:
            if time.monotonic() >= deadline:
                raise
            if not said:
                said = True
                log.warning("lease_wait", run_id=run_id, held=str(e), wait_s=wait_s)
            await asyncio.sleep(min(delay, max(deadline - time.monotonic(), 0.0)))
            delay = min(delay * 2, _MAX_DELAY_S)
            continue
        if said:
            log.info("lease_taken", run_id=run_id, fence=lease.fence)
        return lease
