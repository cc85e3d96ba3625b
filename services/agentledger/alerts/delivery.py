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
    """Per sink, which alert events are handled (delivered or dead-lettered) or being handled.

    A relay claims an event before delivering it and marks it after: concurrent relays never
    deliver one event twice, and a claim left by a crashed relay expires so the event is not lost.
    """

    @abstractmethod
    async def claim(self, sink: str, event_id: str, ttl_s: int) -> bool:
        """True when the caller may deliver: the event is neither handled nor claimed."""

    @abstractmethod
    async def mark(self, sink: str, event_id: str) -> None:
        """Remember for good that ``sink`` handled the event."""


class SinkDeadLetter(ABC):
    """Alerts a sink could not deliver after all its retries."""

    @abstractmethod
    async def add(self, entry: UndeliveredAlert) -> None:
        """Keep ``entry``."""

    @abstractmethod
    async def entries(self, limit: int = 100) -> list[UndeliveredAlert]:
        """The newest entries first."""


class MemoryDeliveryLedger(DeliveryLedger):
    """A dict, for unit tests (claims never expire: there is no crash to recover from)."""

    def __init__(self) -> None:
        self._state: dict[tuple[str, str], str] = {}

    async def claim(self, sink: str, event_id: str, ttl_s: int) -> bool:
        """Claim unless claimed or handled."""
        if (sink, event_id) in self._state:
            return False
        self._state[(sink, event_id)] = "claimed"
        return True

    async def mark(self, sink: str, event_id: str) -> None:
        """Mark handled."""
        self._state[(sink, event_id)] = "done"


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
