"""Which threads a LangGraph run id wrote to, for ``delete_for_runs``: in Redis, or in memory.

The index is derived (every CheckpointSaved carries its metadata's ``run_id``); it only saves
scanning every thread. A thread the saver holds is always checked as well.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from agentledger.redisclient import RedisKeyspace


class RunIndex(ABC):
    """LangGraph run id -> thread ids."""

    @abstractmethod
    async def add(self, run_id: str, thread_id: str) -> None:
        """Note that ``run_id`` saved a checkpoint in ``thread_id`` (idempotent)."""

    @abstractmethod
    async def threads(self, run_id: str) -> set[str]:
        """The threads ``run_id`` saved checkpoints in."""

    @abstractmethod
    async def forget(self, run_id: str) -> None:
        """Drop ``run_id`` from the index."""


class MemoryRunIndex(RunIndex):
    """The index in a dict (unit tests, single-process use)."""

    def __init__(self) -> None:
        self._threads: dict[str, set[str]] = {}

    async def add(self, run_id: str, thread_id: str) -> None:
        """See :meth:`RunIndex.add`."""
        self._threads.setdefault(run_id, set()).add(thread_id)

    async def threads(self, run_id: str) -> set[str]:
        """See :meth:`RunIndex.threads`."""
        return set(self._threads.get(run_id, ()))

    async def forget(self, run_id: str) -> None:
        """See :meth:`RunIndex.forget`."""
        self._threads.pop(run_id, None)


class RedisRunIndex(RedisKeyspace, RunIndex):
    """The index as one Redis set per run id (``<prefix>:lg:run:<run id>``); a lost connection
    is waited out for up to ``outage_budget_s`` (every call is safe to repeat)."""

    def key(self, run_id: str) -> str:
        """The set of one run id."""
        return f"{self._prefix}:lg:run:{run_id}"

    async def add(self, run_id: str, thread_id: str) -> None:
        """See :meth:`RunIndex.add`."""
        await self._guarded(lambda: self._client.sadd(self.key(run_id), thread_id))

    async def threads(self, run_id: str) -> set[str]:
        """See :meth:`RunIndex.threads`."""
        members = await self._guarded(lambda: self._client.smembers(self.key(run_id)))
        return {m.decode() if isinstance(m, bytes) else str(m) for m in members}

    async def forget(self, run_id: str) -> None:
        """See :meth:`RunIndex.forget`."""
        await self._guarded(lambda: self._client.delete(self.key(run_id)))
