"""Rounds: concurrent callers share one lookup, but only one that started after they asked."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Iterable
from typing import Generic, TypeVar

from agentledger.tasks import stop_task

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Rounds(Generic[K, V]):
    """Answers ``ask(keys)`` by calling ``lookup`` with the union of the keys of every caller
    waiting when a round starts; callers arriving during a round wait for the next one.

    So many concurrent callers cost one lookup per round, and no caller gets an answer read
    before its call (a barrier that needs "the end offsets as of now" relies on that). A failed
    lookup fails every caller of its round; the next round tries again.
    """

    def __init__(self, lookup: Callable[[list[K]], Awaitable[dict[K, V]]], *, name: str) -> None:
        self._lookup = lookup
        self._name = name
        self._waiting: list[tuple[list[K], asyncio.Future[dict[K, V]]]] = []
        #: The callers of the round in progress (a lookup that ignores its cancellation must
        #: not hold them).
        self._serving: list[tuple[list[K], asyncio.Future[dict[K, V]]]] = []
        self._task: asyncio.Task[None] | None = None
        self.lookups = 0

    async def ask(self, keys: Iterable[K]) -> dict[K, V]:
        """The values of ``keys`` from a lookup that started after this call."""
        wanted = list(keys)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[K, V]] = loop.create_future()
        self._waiting.append((wanted, answer))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._serve(), name=self._name)
        found = await answer
        return {key: found[key] for key in wanted}

    async def stop(self) -> None:
        """Cancel the round in progress and every waiting caller (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            await stop_task(task)
        waiting, self._waiting, self._serving = [*self._serving, *self._waiting], [], []
        for _, answer in waiting:
            answer.cancel()

    async def _serve(self) -> None:
        while self._waiting:
            callers, self._waiting = self._waiting, []
            self._serving = callers
            keys = list(dict.fromkeys(key for wanted, _ in callers for key in wanted))
            self.lookups += 1
            try:
                found = await self._lookup(keys)
            except asyncio.CancelledError:
                for _, answer in callers:
                    answer.cancel()
                raise
            except Exception as e:  # noqa: BLE001 - every caller of the round gets the error
                for _, answer in callers:
                    if not answer.done():
                        answer.set_exception(e)
                continue
            for _, answer in callers:
                if not answer.done():
                    answer.set_result(found)
