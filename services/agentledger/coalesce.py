"""Calls made together sent as one: a run's Redis calls of open and close, batched across runs.

A worker opening 200 runs at once makes 200 run-index claims, 200 lease acquisitions and, at
their ends, 200 releases: each a Redis round trip costing ~80-200 µs of redis-py CPU, where one
call for all of them costs ~5-10 µs a run. A :class:`Coalescer` queues each call and sends the
queue as one batch once the event loop has run everything ready (one loop turn); calls made
while a batch is in flight go out together in the next one. Each caller gets its own answer,
or the batch's error. Nothing is sent for a caller cancelled before its batch went out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

A = TypeVar("A")
R = TypeVar("R")

#: At most this many calls in one batch (one Redis script runs them all: it blocks Redis while
#: it runs, about 5 µs a call).
MAX_BATCH = 256


class Coalescer(Generic[A, R]):
    """``await coalescer(arg)`` is ``send_many([arg, …])``'s answer for ``arg``."""

    def __init__(
        self, send_many: Callable[[Sequence[A]], Awaitable[Sequence[R]]], *, name: str
    ) -> None:
        self._send_many = send_many
        self._name = name
        self._queue: list[tuple[A, asyncio.Future[R]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def __call__(self, arg: A) -> R:
        """Queue ``arg`` for the next batch and wait for its answer."""
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((arg, future))
        if self._drainer is None:
            self._drainer = asyncio.create_task(self._drain(), name=self._name)
        return await future

    async def _drain(self) -> None:
        """Send the queue in batches until it is empty (the first after one loop turn)."""
        try:
            while self._queue:
                batch = [(a, f) for a, f in self._queue[:MAX_BATCH] if not f.done()]
                del self._queue[:MAX_BATCH]
                if batch:
                    await self._send(batch)
        except BaseException:  # cancelled with the loop: nobody waits in vain
            for _, future in self._queue:
                future.cancel()
            self._queue.clear()
            raise
        finally:
            self._drainer = None

    async def _send(self, batch: list[tuple[A, asyncio.Future[R]]]) -> None:
        try:
            answers = await self._send_many([arg for arg, _ in batch])
        except Exception as e:  # noqa: BLE001 - each caller gets it, as a call alone would
            for _, future in batch:
                if not future.done():
                    future.set_exception(e)
            return
        except BaseException:
            for _, future in batch:
                future.cancel()
            raise
        for (_, future), answer in zip(batch, answers, strict=True):
            if not future.done():
                future.set_result(answer)
