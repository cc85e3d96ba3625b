"""An event log that tells the fleet when a run's events first became durable.

The worker commits a request's offset once its run has a durable write (see
:mod:`agentledger.fleet.offsets`); the SDK decides when to publish, so the fleet hands the SDK
this wrapper and waits on :meth:`DurableTap.durable`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from agentledger.bus.port import EventLog, Position
from agentledger.events.models import Event, RunEvent


class DurableTap(EventLog):
    """Delegates to ``inner``; sets a per-run event after each successful publish of its events."""

    def __init__(self, inner: EventLog) -> None:
        self.inner = inner
        self._durable: dict[str, asyncio.Event] = {}

    def durable(self, run_id: str) -> asyncio.Event:
        """Set once a publish carrying an event of ``run_id`` succeeded (after :meth:`watch`)."""
        return self._durable.setdefault(run_id, asyncio.Event())

    def forget(self, run_id: str) -> None:
        """Stop tracking a run (its request is settled)."""
        self._durable.pop(run_id, None)

    async def publish(self, events: Sequence[Event]) -> None:
        """Publish through the wrapped log, then mark the runs it carried durable."""
        await self.inner.publish(events)
        for run_id in {e.run_id for e in events if isinstance(e, RunEvent)}:
            flag = self._durable.get(run_id)
            if flag is not None:
                flag.set()

    async def read_run(
        self, run_id: str, *, since: Mapping[tuple[str, int], int] | None = None
    ) -> list[RunEvent]:
        """The wrapped log's events of the run."""
        return await self.inner.read_run(run_id, since=since)

    async def run_end_positions(self, run_id: str) -> list[Position]:
        """The wrapped log's end positions of the run."""
        return await self.inner.run_end_positions(run_id)
