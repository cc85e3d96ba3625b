"""The projector's findings as events: stale-fence and gap alerts, dead letters (pure builders).

Alert ids are derived from what was found, so a finding re-raised after a crash-and-redo has
the same id and consumers can de-duplicate it.
"""

from __future__ import annotations

import json

from agentledger.events.models import Alert, DeadLettered, RunEvent
from agentledger.projector.ports import Record
from agentledger.views.model import RunView

SOURCE = "projector"


def _detail(**values: object) -> str:
    return json.dumps(values, separators=(",", ":"), sort_keys=True)


def stale_fence_alert(event: RunEvent, view: RunView, record: Record | None) -> Alert:
    """A zombie writer's event was rejected: name the run, the stale worker and both fences."""
    return Alert(
        alert_id=f"fence.stale:{event.event_id}",
        code="fence.stale",
        severity="critical",
        source=SOURCE,
        run_id=event.run_id,
        worker_id=event.worker_id,
        summary=(
            f"run {event.run_id}: worker {event.worker_id} wrote seq {event.seq} with stale "
            f"fence {event.fence}; fence {view.fence} (worker {view.worker_id}) owns the run "
            f"since seq {view.fence_since_seq}. The event was not applied."
        ),
        action=f"stop worker {event.worker_id}: its lease on the run is gone",
        detail_json=_detail(
            event_id=event.event_id,
            event_type=type(event).__name__,
            seq=event.seq,
            stale_fence=event.fence,
            current_fence=view.fence,
            current_worker=view.worker_id,
            **_where(record),
        ),
    )


def fence_conflict_alert(event: RunEvent, view: RunView, record: Record | None) -> Alert:
    """A newer fence wrote a seq that an older fence had already written (a takeover race)."""
    return Alert(
        alert_id=f"fence.conflict:{event.event_id}",
        code="fence.conflict",
        severity="critical",
        source=SOURCE,
        run_id=event.run_id,
        worker_id=event.worker_id,
        summary=(
            f"run {event.run_id}: worker {event.worker_id} (fence {event.fence}) wrote seq "
            f"{event.seq}, already written under fence {view.fence} by {view.worker_id}. "
            "The event was not applied."
        ),
        action="the new writer must re-read the run and continue after its last applied seq",
        detail_json=_detail(
            event_id=event.event_id,
            seq=event.seq,
            fence=event.fence,
            view_fence=view.fence,
            applied_seq=view.applied_seq,
            **_where(record),
        ),
    )


def gap_alert(run_id: str, applied_seq: int, parked_seqs: list[int], waited_ms: int) -> Alert:
    """Events of a run have waited ahead of a missing seq for longer than the timeout."""
    return Alert(
        alert_id=f"projector.gap:{run_id}:{applied_seq}",
        code="projector.gap",
        severity="warning",
        source=SOURCE,
        run_id=run_id,
        summary=(
            f"run {run_id}: seq {applied_seq + 1} has been missing for {waited_ms} ms while "
            f"{len(parked_seqs)} later events wait (seqs {parked_seqs[:10]})"
        ),
        action=(
            "check the writer of the run: an event was lost or its transaction never committed; "
            "the view stays at the last applied seq"
        ),
        detail_json=_detail(applied_seq=applied_seq, parked_seqs=parked_seqs, waited_ms=waited_ms),
    )


def dead_letter(record: Record, reason: str) -> DeadLettered:
    """A record nobody can use, with why and where it came from."""
    return DeadLettered(
        reason=reason,
        source_topic=record.topic,
        source_partition=record.partition,
        source_offset=record.offset,
        key=record.key,
        value=record.value,
    )


def _where(record: Record | None) -> dict[str, object]:
    if record is None:
        return {}
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset}
