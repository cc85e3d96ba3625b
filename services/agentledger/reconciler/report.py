"""What one reconciler pass did, as counts (printed by ``--once``, summed by the bench)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class PassReport:
    """Counts of one pass (``held``: runs a live writer had; ``backed_off``: provider down;
    ``skipped``: intents claimed but not looked up because the service was stopping)."""

    intents: int = 0
    looked_up: int = 0
    landed: int = 0
    not_landed: int = 0
    unknown: int = 0
    held: int = 0
    backed_off: int = 0
    skipped: int = 0
    resumes: int = 0
    pauses: int = 0
    orphans: int = 0
    compensated: int = 0
    compensation_failures: int = 0
    alerts_opened: int = 0
    alerts_closed: int = 0
    errors: int = 0

    @property
    def resolved(self) -> int:
        """Intents settled for good (LANDED or NOT_LANDED)."""
        return self.landed + self.not_landed

    def to_dict(self) -> dict[str, int]:
        """The counts by name, plus ``resolved``."""
        return {**asdict(self), "resolved": self.resolved}
