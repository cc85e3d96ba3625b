"""Events parked ahead of a gap, bounded per run: what is kept, what is dropped, when to re-read.

An event whose seq is past the run's next one waits in the run's parked hash until the gap
fills. At most ``cap`` wait (``AGENTLEDGER_PROJECTOR_PARKED_MAX``): the lowest seqs are kept (they
are applied first) and the rest are dropped, the run remembering the lowest seq dropped
(``dropped_from``, written with the view in the same atomic step). Nothing is lost: once the
run has applied everything before ``dropped_from``, the projector re-reads the run's records
from the log and folds them again (``Projector._reread_runs``), which clears the mark.
"""

from __future__ import annotations

from agentledger.events.models import RunEvent
from agentledger.views.model import RunView

#: Parked events kept per run unless the settings say otherwise.
DEFAULT_PARKED_MAX = 1000


def unique_parked(events: list[RunEvent]) -> list[RunEvent]:
    """Parked events without duplicates, in the order they will be admitted."""
    seen: dict[str, RunEvent] = {}
    for event in events:
        seen.setdefault(event.event_id, event)
    return sorted(seen.values(), key=lambda e: (e.seq, e.fence, e.event_id))


def bounded_parked(
    events: list[RunEvent], cap: int, dropped_from: int = 0
) -> tuple[list[RunEvent], int]:
    """The parked events to keep (at most ``cap``, lowest seqs first) and the new lowest dropped
    seq: events at or past an earlier ``dropped_from`` are dropped too, so that everything kept
    is below the mark and everything from the mark on is re-read from the log."""
    parked = unique_parked(events)
    if dropped_from:
        parked = [e for e in parked if e.seq < dropped_from]
    kept, over = parked[:cap], parked[cap:]
    if over:
        dropped_from = min(over[0].seq, dropped_from) if dropped_from else over[0].seq
    return kept, dropped_from


def needs_reread(view: RunView, dropped_from: int) -> bool:
    """True when the run's next event may be one that was dropped over the cap."""
    return dropped_from > 0 and view.applied_seq + 1 >= dropped_from
