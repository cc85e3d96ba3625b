"""The read side of the view-store port: what the SDK, reconciler and CLI ask of the views."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from agentledger.bus.port import Position
from agentledger.views.model import RunView


@dataclass(frozen=True)
class OpenIntent:
    """An effect intent with no known outcome, as indexed for the reconciler."""

    run_id: str
    idempotency_key: str
    intended_at: int


class ViewReader(ABC):
    """Read resume views and the projector's progress."""

    @abstractmethod
    async def load(self, run_id: str) -> RunView | None:
        """The run's view, or None if the projector has never seen the run."""

    @abstractmethod
    async def progress(self, positions: list[Position]) -> bool:
        """True when the projector has applied everything before each of ``positions``."""

    @abstractmethod
    async def runs_by_status(self, status: str, limit: int = 1000) -> list[str]:
        """Run ids currently in ``status`` (running, paused, succeeded …)."""

    @abstractmethod
    async def open_intents(
        self, older_than: int | None = None, limit: int = 1000
    ) -> list[OpenIntent]:
        """Open intents, oldest first; ``older_than`` is an epoch-ms cut-off."""
