"""The stable alert codes: what each means, how bad it is, and what a person should do.

Codes are part of the contract with on-call tooling (webhook receivers filter on them): never
rename one; add new codes instead. Emitters pass an :class:`AlertCode` from here, never a string
(``tests/unit/test_alert_codes.py`` scans them). To add one: define it below, list it in
:data:`ALERT_CODES`; a code that replaces an old spelling goes in :data:`LEGACY_CODES` too.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentledger.events.models import Alert, Severity


@dataclass(frozen=True)
class AlertCode:
    """One kind of finding: its stable code, default severity, title and the action to take."""

    code: str
    severity: Severity
    title: str
    action: str


EFFECT_UNKNOWN = AlertCode(
    "effect.unknown",
    "critical",
    "the provider cannot tell whether an effect happened",
    "Check the provider for the idempotency key. The run stays paused; it resumes by itself "
    "once the provider answers a lookup again (the reconciler keeps asking), or settle it by "
    "hand: agentledger effects resolve RUN KEY --landed --ref REF | --not-landed.",
)
EFFECT_IDENTITY_MISMATCH = AlertCode(
    "effect.identity_mismatch",
    "critical",
    "the provider holds this idempotency key for an effect with other identity fields",
    "A bug in the agent or a key collision: compare both identity hashes, fix the agent, then "
    "cancel or fork the run. Nothing is retried under this key.",
)
EFFECT_NOT_COMPENSABLE = AlertCode(
    "effect.not_compensable",
    "warning",
    "an effect should be undone but cannot be by the adapter",
    "Undo it by hand at the provider (the external reference is in the alert), then ack.",
)
EFFECT_COMPENSATION_FAILED = AlertCode(
    "effect.compensation_failed",
    "critical",
    "undoing an effect failed",
    "Look at the provider's answer in the detail; retry with `agentledger effects compensate` "
    "once the cause is fixed, or undo it by hand and ack.",
)
RUN_PAUSE_EXPIRED = AlertCode(
    "run.pause_expired",
    "warning",
    "a run is paused past the expiry of what it waits for",
    "Decide: `agentledger runs approve|reject RUN`, or fork the run; an approval given now is "
    "refused as expired unless the pause is renewed.",
)
RUN_ORPHANED = AlertCode(
    "run.orphaned",
    "warning",
    "a running run has no live lease and nobody is resuming it",
    "The reconciler re-queued it (ResumeRequested). If this alert stays open, check that "
    "workers are running and consuming the requests topic.",
)
RUN_BUDGET_OVERRUN = AlertCode(
    "run.budget_overrun",
    "warning",
    "a run spent more than one of its budget limits",
    "Check why the limit did not stop the run (limits are enforced at step boundaries); "
    "raise the limit or cancel the run.",
)
FENCE_STALE = AlertCode(
    "fence.stale",
    "critical",
    "a writer whose lease had moved on tried to write events",
    "The named worker was paused or partitioned past its lease; its writes were rejected. "
    "Check the worker's host (GC pauses, SIGSTOP, clock) and restart it.",
)
DEADLETTER_RECORD = AlertCode(
    "deadletter.record",
    "critical",
    "records nobody could decode were moved to the dead-letter topic",
    "Inspect the dead-letter topic (reason, source topic, partition, offset); fix the producer "
    "or the schema, then ack.",
)
PROJECTOR_GAP = AlertCode(
    "projector.gap",
    "warning",
    "a run's events have waited ahead of a missing seq while the projector is at the log end",
    "Check the run's writer: an event was lost or its transaction never committed. The view "
    "stays at the last applied seq; `agentledger views rebuild` once the log is repaired.",
)
VIEWS_WIPED = AlertCode(
    "views.wiped",
    "warning",
    "the projector's views vanished from Redis (FLUSHALL, eviction or deleted keys)",
    "Nothing to repair: the projector re-projects the views from the log by itself (readers "
    "fold from Kafka meanwhile). Find out who wiped Redis; `agentledger views verify` checks "
    "the result.",
)
PROJECTOR_STALLED = AlertCode(
    "projector.stalled",
    "critical",
    "the projector keeps failing to apply a batch: a partition's progress is stuck",
    "Read the error in the detail and the projector's log (batch_failed_retrying, tick_failed); "
    "fix Redis or Kafka, or run `agentledger views rebuild`.",
)
RUN_UNREADABLE = AlertCode(
    "run.unreadable",
    "critical",
    "a run's log holds a record nobody can decode, so the run cannot be resumed",
    "Inspect the dead letter (topic, partition, offset in the detail), then skip it: "
    "`agentledger runs skip-record RUN --topic T --partition P --offset O --reason TEXT`; "
    "the run becomes resumable and the reconciler re-queues it.",
)
RUN_EVENT_AFTER_FINISH = AlertCode(
    "run.event_after_finish",
    "critical",
    "an event was written to a run that had already finished",
    "A finished run takes only effect findings and compensations; this event was not applied. "
    "Find the writer (worker id, topic, partition and offset in the detail): a forged record, "
    "or a worker that kept writing after the run ended.",
)
RUN_SEQ_DIVERGENT = AlertCode(
    "run.seq_divergent",
    "critical",
    "two different events claim the same seq of a run",
    "The first one stays applied, the second was not. Compare both at the offsets in the "
    "detail: two writers shared a fence, or a record was forged.",
)

RUN_BUDGET_EXCEEDED = AlertCode(
    "run.budget_exceeded",
    "warning",
    "a run was stopped by one of its budget limits",
    "Raise the limit and fork or restart the run if the work must go on.",
)
RUN_VERSION_DRIFT = AlertCode(
    "run.version_drift",
    "warning",
    "a resume was refused: the code, prompt, tool schema or model version changed",
    "Resume with on_version_drift='continue' or 'replan' if the change is safe for this run, "
    "or fork it onto the new version.",
)
LEASE_LOST = AlertCode(
    "lease.lost",
    "critical",
    "a fleet worker could not renew a run's lease and abandoned the run",
    "Check the worker's host: a freeze (GC, SIGSTOP, VM pause) or a partition from Redis "
    "longer than the lease ttl. The next lease holder (or the reconciler) carries the run on.",
)
FENCE_CONFLICT = AlertCode(
    "fence.conflict",
    "critical",
    "a newer fence wrote a seq an older fence had already written (a takeover race)",
    "The event was not applied: the new writer must re-read the run and continue after its "
    "last applied seq.",
)
APPROVAL_REJECTED = AlertCode(
    "approval.rejected",
    "warning",
    "the approval a run waits for was rejected",
    "Nothing to do unless the rejection was a mistake: then fork the run and ask again.",
)
APPROVAL_EXPIRED = AlertCode(
    "approval.expired",
    "warning",
    "a run's approval expired before it was used",
    "Approve the intent again (agentledger runs approve RUN) for the current generation.",
)
APPROVAL_REVOKED = AlertCode(
    "approval.revoked",
    "warning",
    "a run's approval was revoked",
    "Approve the intent again if it should go ahead, or reject it to finish the run.",
)
APPROVAL_OTHER_GENERATION = AlertCode(
    "approval.other_generation",
    "warning",
    "a run's approval was given for another generation (before a fork or a replan)",
    "Approve the intent again for the current generation.",
)
APPROVAL_OTHER_INTENT = AlertCode(
    "approval.other_intent",
    "warning",
    "the approval on record is for another intent than the one the run asks for now",
    "Check what the run asks (agentledger runs show RUN) and approve that intent.",
)

#: The approval alert for each refused approval status.
APPROVAL_CODES: dict[str, AlertCode] = {
    "rejected": APPROVAL_REJECTED,
    "expired": APPROVAL_EXPIRED,
    "revoked": APPROVAL_REVOKED,
    "other_generation": APPROVAL_OTHER_GENERATION,
    "other_intent": APPROVAL_OTHER_INTENT,
}

ALERT_CODES: dict[str, AlertCode] = {
    c.code: c
    for c in (
        EFFECT_UNKNOWN,
        EFFECT_IDENTITY_MISMATCH,
        EFFECT_NOT_COMPENSABLE,
        EFFECT_COMPENSATION_FAILED,
        RUN_PAUSE_EXPIRED,
        RUN_ORPHANED,
        RUN_BUDGET_OVERRUN,
        FENCE_STALE,
        DEADLETTER_RECORD,
        PROJECTOR_GAP,
        VIEWS_WIPED,
        PROJECTOR_STALLED,
        RUN_UNREADABLE,
        RUN_EVENT_AFTER_FINISH,
        RUN_SEQ_DIVERGENT,
        RUN_BUDGET_EXCEEDED,
        RUN_VERSION_DRIFT,
        LEASE_LOST,
        FENCE_CONFLICT,
        *APPROVAL_CODES.values(),
    )
}

#: Spellings workers wrote before every code came from this registry; alerts already in the
#: log with one of them are read as the registered code (never remove an entry).
LEGACY_CODES: dict[str, AlertCode] = {
    "effect_unknown": EFFECT_UNKNOWN,
    "identity_mismatch": EFFECT_IDENTITY_MISMATCH,
    "budget_exceeded": RUN_BUDGET_EXCEEDED,
    "version_drift": RUN_VERSION_DRIFT,
    **{f"approval_{status}": code for status, code in APPROVAL_CODES.items()},
}


def code_of(code: str) -> AlertCode | None:
    """The registered code for ``code`` (an old spelling included); None if unknown."""
    return ALERT_CODES.get(code) or LEGACY_CODES.get(code)


def canonical(alert: Alert) -> Alert:
    """``alert`` with its code in today's spelling (an old event from the log is renamed)."""
    legacy = LEGACY_CODES.get(alert.code)
    return alert if legacy is None else alert.model_copy(update={"code": legacy.code})
