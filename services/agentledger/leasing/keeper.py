"""Keeps a lease alive in the background and says, through ``lost``, when it is gone."""

from __future__ import annotations

import asyncio
import time
from types import TracebackType

import structlog

from agentledger.errors import AgentLedgerError, StaleFenceError
from agentledger.leases import Lease, LeaseStore
from agentledger.tasks import stop_task

_log = structlog.get_logger(__name__)


class LeaseKeeper:
    """Renews ``lease`` every ``interval_ms`` (default ttl/3) inside ``async with``.

    ``lost`` is set when a renewal finds the lease gone (another fence, expired) or when no
    renewal has succeeded for a whole ttl (the store is unreachable: assume the worst). On exit
    the renewal task is cancelled and, unless lost, the lease is released.
    """

    def __init__(
        self,
        store: LeaseStore,
        lease: Lease,
        ttl_ms: int,
        *,
        interval_ms: int | None = None,
        release_on_exit: bool = True,
    ) -> None:
        self._store = store
        self._lease = lease
        self._ttl_ms = ttl_ms
        self._interval = (interval_ms if interval_ms is not None else max(ttl_ms // 3, 1)) / 1000
        self._release_on_exit = release_on_exit
        self._task: asyncio.Task[None] | None = None
        self._first: asyncio.TimerHandle | None = None
        self._stopped = False
        self.lost = asyncio.Event()

    @property
    def lease(self) -> Lease:
        """The lease as last renewed."""
        return self._lease

    def ensure_held(self) -> None:
        """Raise StaleFenceError if the lease is known to be lost."""
        if self.lost.is_set():
            raise StaleFenceError(
                f"lease with fence {self._lease.fence} was lost", run_id=self._lease.run_id
            )

    async def __aenter__(self) -> LeaseKeeper:
        # The renewal task starts when the first renewal is due, not before: a run that ends
        # within one interval (most do) never pays for a task, its sleep and its cancellation
        # (DESIGN.md §13, session 15). The renewals are made at the same moments.
        entered = time.monotonic()
        self._first = asyncio.get_running_loop().call_later(
            self._interval, self._start_renewing, entered
        )
        return self

    def _start_renewing(self, entered: float) -> None:
        self._first = None
        self._task = asyncio.get_running_loop().create_task(
            self._renew_forever(entered), name=f"lease-keeper:{self._lease.run_id}"
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop renewing and release the lease unless lost (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        if self._first is not None:  # no renewal was due yet: there is no task to stop
            self._first.cancel()
            self._first = None
        if self._task is not None:
            await stop_task(self._task)
        if self._release_on_exit and not self.lost.is_set():
            try:
                await self._store.release(self._lease)
            except AgentLedgerError as e:
                # Not fatal: the lease expires by itself after its ttl.
                _log.warning("lease_release_failed", run_id=self._lease.run_id, error=str(e))

    async def _renew_forever(self, entered: float) -> None:
        """Renew now (the first renewal is due), then one interval after each attempt."""
        log = _log.bind(run_id=self._lease.run_id, fence=self._lease.fence)
        last_ok = entered
        while True:
            try:
                self._lease = await self._store.renew(self._lease, self._ttl_ms)
            except StaleFenceError as e:
                log.warning("lease_lost", reason=str(e))
                self.lost.set()
                return
            except AgentLedgerError as e:
                if time.monotonic() - last_ok >= self._ttl_ms / 1000:
                    log.warning("lease_lost", reason=f"no renewal for a whole ttl: {e}")
                    self.lost.set()
                    return
                log.warning("lease_renew_failed", error=str(e), retryable=e.retryable)
            else:
                last_ok = time.monotonic()
            await asyncio.sleep(self._interval)
