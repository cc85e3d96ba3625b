"""The stable alert codes: what each means, how bad it is, and what a person should do.

Codes are part of the contract with on-call tooling (webhook receivers filter on them): never
rename one; add new codes instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentledger.events.models import Severity


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
    )
}
