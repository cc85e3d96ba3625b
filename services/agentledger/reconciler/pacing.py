"""How a reconciler pass paces its batches: runs in flight, turns to read views, write waves.

All three are plain asyncio coordination, no I/O: :class:`InFlight` bounds the runs claimed and
not yet released, :class:`ViewTurns` says when a batch claimed ahead reads its views (in batch
order, while the runs waiting for lookups are few), :class:`WriteWaves` lets a batch's writes
share transactions (DESIGN.md §19).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = [
    "FIRST_BATCH",
    "WRITE_LINGER_S",
    "InFlight",
    "ViewTurns",
    "WriteWaves",
    "batch_sizes",
]

#: Runs in a pass's first batch: its lookups start after a short claim, and the batches after
#: it double up to the batch size while those lookups run.
FIRST_BATCH = 16


#: How long a resolved run's write waits for the batch's other runs to be resolved too, so
#: their writes share one transaction (the log commits what is pending together).
WRITE_LINGER_S = 0.25


class WriteWaves:
    """Lets the writes of a batch's runs go in waves: a wave opens when every run still being
    resolved is ready to write, or ``linger_s`` after its first run was ready."""

    def __init__(self, runs: int, linger_s: float) -> None:
        self._left = runs
        self._linger_s = linger_s
        self._ready = 0
        self._open: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None

    async def ready(self) -> None:
        """Wait until this run's wave opens."""
        if self._open is None:
            self._open = asyncio.Event()
            self._timer = asyncio.get_running_loop().call_later(self._linger_s, self._release)
        wave = self._open
        self._ready += 1
        self._check()
        await wave.wait()

    def done(self) -> None:
        """A run of the batch will not write (nothing due, or it failed): wait no more for it."""
        self._left -= 1
        self._check()

    def _check(self) -> None:
        if self._open is not None and self._ready >= self._left:
            self._release()

    def _release(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._open is not None:
            self._open.set()
        self._left -= self._ready
        self._ready, self._open, self._timer = 0, None, None


class InFlight:
    """The runs a pass has in flight: a batch starts once its runs fit under the limit, and
    batches start in the order they are taken."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._used = 0
        self._room = asyncio.Condition()

    async def take(self, runs: int) -> None:
        """Wait until ``runs`` more fit (``runs`` at most the limit), then count them."""
        async with self._room:
            await self._room.wait_for(lambda: self._used + runs <= self._limit)
            self._used += runs

    async def give(self, runs: int) -> None:
        """``runs`` are done: make room for the next batch."""
        async with self._room:
            self._used -= runs
            self._room.notify_all()


def batch_sizes(runs: int, batch: int) -> list[int]:
    """How ``runs`` are cut into batches: ``FIRST_BATCH`` first, doubling up to ``batch``."""
    sizes: list[int] = []
    size = min(batch, FIRST_BATCH)
    left = runs
    while left > 0:
        sizes.append(min(size, left))
        left -= sizes[-1]
        size = min(batch, size * 2)
    return sizes


class ViewTurns:
    """When each batch claimed ahead reads its views: in batch order, while fewer than ``low``
    runs are pending (in a batch that started reading its views, lookups not finished).

    A view read costs CPU the lookups' event loop needs (a batch's worth of decoding in one
    go): read all at once, the reads delay the lookups under way; read too late, the lookups
    run dry. A batch's turn starts once every batch before it has started its own (or dropped
    out) and the pending runs are below ``low``; several turns may overlap (a view read also
    waits for the projector and for Redis). :meth:`looked_up` counts a run out, and
    :meth:`finished` says a batch will start no turn (idempotent: call it on every exit).
    """

    def __init__(self, low: int) -> None:
        self._low = low
        self._pending = 0
        self._next = 0
        self._over: set[int] = set()
        self._changed = asyncio.Condition()

    @asynccontextmanager
    async def turn(self, batch: int, runs: int) -> AsyncIterator[None]:
        """Wait for batch number ``batch``'s turn (batches count from 0) to read the views of
        ``runs`` runs, which are pending from then on; if the read fails, they are not."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._next == batch and self._pending < self._low)
            self._pending += runs
            self._end(batch)
        try:
            yield
        except BaseException:
            async with self._changed:
                self._pending -= runs
                self._changed.notify_all()
            raise

    async def finished(self, batch: int) -> None:
        """Batch ``batch`` will start no turn (any more): the next batch may take its turn."""
        async with self._changed:
            self._end(batch)

    async def looked_up(self) -> None:
        """One pending run's lookups are over (answered, skipped or failed)."""
        async with self._changed:
            self._pending -= 1
            # Only crossing below the mark can let a waiting turn start (the rest wake on the
            # turn order): waking every waiter on every lookup cost CPU the lookups need.
            if self._pending == self._low - 1:
                self._changed.notify_all()

    def _end(self, batch: int) -> None:
        self._over.add(batch)
        while self._next in self._over:
            self._next += 1
        self._changed.notify_all()
