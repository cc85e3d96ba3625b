"""The projector's findings as events: fence, gap, wipe and stall alerts, dead letters (builders).

Alert ids are derived from what was found, so a finding re-raised after a crash-and-redo has
the same id and consumers can de-duplicate it.
"""

from __future__ import annotations

import json

from agentledger.alerts.codes import (
    FENCE_CONFLICT,
    FENCE_STALE,
    PROJECTOR_GAP,
    PROJECTOR_STALLED,
    RUN_EVENT_AFTER_FINISH,
    RUN_SEQ_DIVERGENT,
    VIEWS_WIPED,
    AlertCode,
)
from agentledger.events.models import Alert, DeadLettered, RunEvent, now_ms
from agentledger.projector.ports import LogRecord
from agentledger.views.model import RunView

SOURCE = "projector"


def _detail(**values: object) -> str:
    return json.dumps(values, separators=(",", ":"), sort_keys=True)


def _event_alert(
    code: AlertCode,
    event: RunEvent,
    record: LogRecord | None,
    summary: str,
    *,
    action: str | None = None,
    **detail: object,
) -> Alert:
    """An alert about one event the projector did not apply (its id derived from the event's)."""
    return Alert(
        alert_id=f"{code.code}:{event.event_id}",
        code=code.code,
        severity=code.severity,
        source=SOURCE,
        run_id=event.run_id,
        worker_id=event.worker_id,
        summary=summary,
        action=code.action if action is None else action,
        detail_json=_detail(
            event_id=event.event_id,
            event_type=type(event).__name__,
            seq=event.seq,
            **detail,
            **_where(record),
        ),
    )


def stale_fence_alert(event: RunEvent, view: RunView, record: LogRecord | None) -> Alert:
    """A zombie writer's event was rejected: name the run, the stale worker and both fences."""
    return _event_alert(
        FENCE_STALE,
        event,
        record,
        f"run {event.run_id}: worker {event.worker_id} wrote seq {event.seq} with stale "
        f"fence {event.fence}; fence {view.fence} (worker {view.worker_id}) owns the run "
        f"since seq {view.fence_since_seq}. The event was not applied.",
        action=f"stop worker {event.worker_id}: its lease on the run is gone",
        stale_fence=event.fence,
        current_fence=view.fence,
        current_worker=view.worker_id,
    )


def fence_conflict_alert(event: RunEvent, view: RunView, record: LogRecord | None) -> Alert:
    """A newer fence wrote a seq that an older fence had already written (a takeover race)."""
    return _event_alert(
        FENCE_CONFLICT,
        event,
        record,
        f"run {event.run_id}: worker {event.worker_id} (fence {event.fence}) wrote seq "
        f"{event.seq}, already written under fence {view.fence} by {view.worker_id}. "
        "The event was not applied.",
        action="the new writer must re-read the run and continue after its last applied seq",
        fence=event.fence,
        view_fence=view.fence,
        applied_seq=view.applied_seq,
    )


def divergent_seq_alert(event: RunEvent, view: RunView, record: LogRecord | None) -> Alert:
    """A second, different event claims a seq already applied under the same fence."""
    return _event_alert(
        RUN_SEQ_DIVERGENT,
        event,
        record,
        f"run {event.run_id}: a {type(event).__name__} at seq {event.seq} (fence "
        f"{event.fence}, worker {event.worker_id}) differs from the event applied at that "
        "seq. It was not applied.",
        fence=event.fence,
        applied_digest=view.recent_digests.get(event.seq),
    )


def closed_run_alert(event: RunEvent, view: RunView, record: LogRecord | None) -> Alert:
    """An event written to a finished run that a finished run does not take."""
    return _event_alert(
        RUN_EVENT_AFTER_FINISH,
        event,
        record,
        f"run {event.run_id} finished ({view.status}) but worker {event.worker_id} wrote a "
        f"{type(event).__name__} at seq {event.seq} (fence {event.fence}). It was not "
        "applied.",
        fence=event.fence,
        status=view.status,
        applied_seq=view.applied_seq,
    )


#: How many parked seqs a gap alert names (the count is always given).
GAP_SEQS_SHOWN = 20
#: Dead letters carry at most this much of the source record: the publisher's request limit
#: is 1 MiB, and the source position is the reference to the whole record.
DEAD_LETTER_VALUE_MAX = 64 * 1024
DEAD_LETTER_KEY_MAX = 1024
DEAD_LETTER_REASON_MAX = 2000


def gap_alert(
    run_id: str, applied_seq: int, parked_seqs: list[int], waited_ms: int, dropped_from: int = 0
) -> Alert:
    """Events of a run have waited ahead of a missing seq for longer than the timeout (the seqs
    are named up to :data:`GAP_SEQS_SHOWN`: a long gap must not make a huge alert); with
    ``dropped_from``, later events were dropped over the parked cap (re-read once it fills)."""
    code = PROJECTOR_GAP
    shown = sorted(parked_seqs)[:GAP_SEQS_SHOWN]
    more = len(parked_seqs) - len(shown)
    listed = f"seqs {shown}" + (f" and {more} more" if more else "")
    if dropped_from:
        listed += (
            f"; events from seq {dropped_from} on were over the parked cap and are re-read from "
            "the log once the gap fills"
        )
    return Alert(
        alert_id=f"{code.code}:{run_id}:{applied_seq}",
        code=code.code,
        severity=code.severity,
        source=SOURCE,
        run_id=run_id,
        summary=(
            f"run {run_id}: seq {applied_seq + 1} has been missing for {waited_ms} ms while "
            f"{len(parked_seqs)} later events wait ({listed})"
        ),
        action=code.action,
        detail_json=_detail(
            applied_seq=applied_seq,
            parked_count=len(parked_seqs),
            parked_seqs=shown,
            waited_ms=waited_ms,
            **({"dropped_from": dropped_from} if dropped_from else {}),
        ),
    )


def wiped_alert(namespace: str, fresh: str, why: str) -> Alert:
    """The views vanished under the projector; it re-projects them from the log into ``fresh``."""
    code = VIEWS_WIPED
    return Alert(
        alert_id=f"{code.code}:{namespace}",
        code=code.code,
        severity=code.severity,
        source=SOURCE,
        summary=(
            f"the views of namespace {namespace} vanished from Redis ({why}); the projector "
            f"re-projects every partition from the log into namespace {fresh}"
        ),
        action=code.action,
        detail_json=_detail(namespace=namespace, fresh=fresh, why=why),
    )


def stalled_alert(instance: str, failures: int, error: str) -> Alert:
    """The projector failed to apply the same work ``failures`` times in a row."""
    code = PROJECTOR_STALLED
    return Alert(
        alert_id=f"{code.code}:{instance}:{now_ms()}",
        code=code.code,
        severity=code.severity,
        source=SOURCE,
        summary=(
            f"projector {instance}: {failures} attempts in a row failed, progress is stuck "
            f"({_clip(error, 300)})"
        ),
        action=code.action,
        detail_json=_detail(instance=instance, failures=failures, error=_clip(error, 2000)),
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def dead_letter(record: LogRecord, reason: str) -> DeadLettered:
    """A record nobody can use, with why and where it came from.

    The body is cut to :data:`DEAD_LETTER_VALUE_MAX` bytes (the reason says so) so that a dead
    letter always fits the publisher's limit: a poison record near 1 MiB must not stall its
    partition. Its event id comes from the source position, so a redo publishes the same letter.
    """
    value, key = record.value, record.key
    notes = []
    if value is not None and len(value) > DEAD_LETTER_VALUE_MAX:
        notes.append(f"value cut to {DEAD_LETTER_VALUE_MAX} of {len(value)} bytes")
        value = value[:DEAD_LETTER_VALUE_MAX]
    if key is not None and len(key) > DEAD_LETTER_KEY_MAX:
        notes.append(f"key cut to {DEAD_LETTER_KEY_MAX} of {len(key)} bytes")
        key = key[:DEAD_LETTER_KEY_MAX]
    if notes:
        where = f"{record.topic}:{record.partition}@{record.offset}"
        reason = f"{reason} [{'; '.join(notes)}; the whole record is at {where}]"
    return DeadLettered(
        event_id=f"dl:{record.topic}:{record.partition}:{record.offset}",
        reason=_clip(reason, DEAD_LETTER_REASON_MAX),
        source_topic=record.topic,
        source_partition=record.partition,
        source_offset=record.offset,
        key=key,
        value=value,
    )


def _where(record: LogRecord | None) -> dict[str, object]:
    if record is None:
        return {}
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset}
