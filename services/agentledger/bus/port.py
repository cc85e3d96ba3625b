"""The event-log port: write events transactionally, read a run's committed events back."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from agentledger.events.models import Event, RunEvent
from agentledger.events.positions import Position

__all__ = ["EventLog", "EventPublisher", "FenceGuard", "Holder", "Position"]


class Holder(NamedTuple):
    """Who a writer claims to be for a run: the fence and the owner of the lease it acquired."""

    fence: int
    owner: str


class FenceGuard(ABC):
    """Asked by the log right before a commit: which of these (run, holder) claims are stale?"""

    @abstractmethod
    async def stale(self, claims: dict[str, Holder]) -> set[str]:
        """The run ids whose live lease is not held by the given owner with the given fence."""


class EventPublisher(ABC):
    """Anything events can be published to (alerts, requests, dead letters, run events)."""

    @abstractmethod
    async def publish(self, events: Sequence[Event]) -> None:
        """Write ``events``; return when they are durable (acks=all)."""


class EventLog(EventPublisher):
    """Append-only, partitioned by run_id, read_committed.

    ``publish`` writes all given events in one transaction and returns once it is committed;
    concurrent calls may share one transaction (group commit). If a ``FenceGuard`` is configured,
    a publish carrying events of a run whose fence or owner (``worker_id``) is stale is not
    written at all and its caller gets StaleFenceError; the other publishes of the same commit
    are unaffected. The guard is asked before the commit, so a lease taken over in between lets
    a stale write through: readers (the projector) still reject stale fences (DESIGN.md
    invariant 5).
    """

    @abstractmethod
    async def publish(self, events: Sequence[Event]) -> None:
        """Write ``events`` atomically; return when they are durable and visible."""

    @abstractmethod
    async def read_run(
        self, run_id: str, *, since: Mapping[tuple[str, int], int] | None = None
    ) -> list[RunEvent]:
        """Every committed event of ``run_id`` on the run topics, sorted by seq (stable:
        duplicates keep log order); undecodable records raise RunLogCorruptError.

        ``since`` maps (topic, partition) to the first offset to read there (the tail a view
        has not applied yet); partitions it does not name are read from their beginning.
        """

    @abstractmethod
    async def run_end_positions(self, run_id: str) -> list[Position]:
        """The committed end of each run-topic partition holding ``run_id``'s events."""

    async def runs_end_positions(self, run_ids: Sequence[str]) -> dict[str, list[Position]]:
        """:meth:`run_end_positions` of each run; logs override it with one round for all."""
        found = await asyncio.gather(*(self.run_end_positions(r) for r in run_ids))
        return dict(zip(run_ids, found, strict=True))

    async def never_written(self) -> bool:
        """True only if no record was ever written to any run-topic partition (the run index
        may then be vouched for). The default never says so: such a log always reads."""
        return False
