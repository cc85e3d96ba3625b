"""What the alert sinks remember: which events each sink delivered, and what it gave up on."""

from __future__ import annotations

from abc import ABC, abstractmethod

from pydantic import BaseModel, ConfigDict

from agentledger.events.models import Alert


class UndeliveredAlert(BaseModel):
    """An alert a sink gave up on, with why: the sink's own dead letter."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sink: str
    alert: Alert
    attempts: int
    error: str
    failed_at: int


class DeliveryLedger(ABC):
    """Per sink, the alert events already handled (delivered or dead-lettered)."""

    @abstractmethod
    async def handled(self, sink: str, event_id: str) -> bool:
        """True when ``sink`` already handled the event."""

    @abstractmethod
    async def mark(self, sink: str, event_id: str) -> None:
        """Remember that ``sink`` handled the event."""


class SinkDeadLetter(ABC):
    """Alerts a sink could not deliver after all its retries."""

    @abstractmethod
    async def add(self, entry: UndeliveredAlert) -> None:
        """Keep ``entry``."""

    @abstractmethod
    async def entries(self, limit: int = 100) -> list[UndeliveredAlert]:
        """The newest entries first."""


class MemoryDeliveryLedger(DeliveryLedger):
    """A set, for unit tests."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()

    async def handled(self, sink: str, event_id: str) -> bool:
        """True when marked."""
        return (sink, event_id) in self._seen

    async def mark(self, sink: str, event_id: str) -> None:
        """Mark."""
        self._seen.add((sink, event_id))


class MemorySinkDeadLetter(SinkDeadLetter):
    """A list, for unit tests."""

    def __init__(self) -> None:
        self._entries: list[UndeliveredAlert] = []

    async def add(self, entry: UndeliveredAlert) -> None:
        """Append."""
        self._entries.append(entry)

    async def entries(self, limit: int = 100) -> list[UndeliveredAlert]:
        """Newest first."""
        return list(reversed(self._entries))[:limit]
