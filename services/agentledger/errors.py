"""The one error hierarchy of agentledger: every error says what happened and what to fix."""

from __future__ import annotations

from typing import ClassVar


class AgentLedgerError(Exception):
    """Root of every error agentledger raises on purpose.

    ``retryable`` tells the outermost loop whether trying the same call again can help.
    """

    retryable: ClassVar[bool] = False


class ConfigurationError(AgentLedgerError):
    """A setting is missing or invalid; the message names the setting and how to fix it."""


class StackError(AgentLedgerError):
    """The local Kafka/Redis stack could not be installed, started or reached."""


class UnreachableError(AgentLedgerError):
    """A broker, Redis or provider did not answer; the message names the endpoint."""

    retryable: ClassVar[bool] = True

    def __init__(
        self, what: str, endpoint: str, hint: str = "", *, waited_s: float | None = None
    ) -> None:
        self.what = what
        self.endpoint = endpoint
        #: How long the caller waited for it (its outage budget), when it waited at all.
        self.waited_s = waited_s
        message = f"{what} at {endpoint} is unreachable"
        super().__init__(f"{message}: {hint}" if hint else message)


class DecodeError(AgentLedgerError):
    """A record could not be decoded; carries where it came from so it can be dead-lettered."""

    def __init__(
        self,
        reason: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = reason
        self.topic = topic
        self.partition = partition
        self.offset = offset
        where = "" if topic is None else f" at {topic}[{partition}]@{offset}"
        super().__init__(f"undecodable record{where}: {reason}")


class UnknownSchemaError(DecodeError):
    """The record's schema fingerprint is not one this version knows (or ever knew)."""


class RunError(AgentLedgerError):
    """Something is wrong with one run; carries the run id (and step/effect when known)."""

    def __init__(
        self,
        message: str,
        *,
        run_id: str,
        step: int | None = None,
        effect: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.step = step
        self.effect = effect
        where = f"run {run_id}"
        if step is not None:
            where += f" step {step}"
        if effect is not None:
            where += f" effect {effect}"
        super().__init__(f"{where}: {message}")


class StaleFenceError(RunError):
    """This writer's lease has moved on: another worker owns the run now."""


class LeaseHeldError(RunError):
    """Another live writer holds the run's lease."""

    retryable: ClassVar[bool] = True


class ReplayMismatchError(RunError):
    """A resumed run asked for a different activity/effect than the recorded one at that place."""


class IdentityMismatchError(RunError):
    """Same idempotency key, different identity fields: a bug in the agent, never retried."""

    def __init__(
        self,
        *,
        run_id: str,
        step: int,
        effect: str,
        key: str,
        recorded_hash: str,
        new_hash: str,
    ) -> None:
        self.key = key
        self.recorded_hash = recorded_hash
        self.new_hash = new_hash
        super().__init__(
            f"idempotency key {key} was recorded with identity hash {recorded_hash}, "
            f"this retry has {new_hash}: the effect's identity fields changed",
            run_id=run_id,
            step=step,
            effect=effect,
        )


class VersionDriftError(RunError):
    """The run started under other versions and the policy refuses to resume it."""


class BudgetExceededError(RunError):
    """A budget limit (tokens, dollars, steps, consecutive errors, deadline) is spent."""


class EffectUnknownError(RunError):
    """The provider cannot tell whether an effect happened; a human must decide."""

    def __init__(self, message: str, *, run_id: str, step: int, effect: str, key: str) -> None:
        self.key = key
        super().__init__(message, run_id=run_id, step=step, effect=effect)


class ApprovalError(RunError):
    """An approval is missing, expired, revoked, or was issued for another generation/intent."""


class ProviderError(AgentLedgerError):
    """A provider answered with an error that is not about connectivity."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class ProviderUnavailableError(ProviderError):
    """The provider timed out, refused the connection, or answered 5xx: the outcome is UNKNOWN."""

    retryable: ClassVar[bool] = True


class ProviderConflictError(ProviderError):
    """The provider refused: same idempotency key with a different identity (HTTP 409)."""


class ProviderRequestError(ProviderError):
    """The request is malformed (bad kind, key or body) or names no such object: fix the caller."""


class ProviderIdentityConflictError(ProviderConflictError):
    """The provider already holds this idempotency key for another effect identity (HTTP 409)."""

    def __init__(
        self,
        message: str,
        *,
        key: str,
        recorded_hash: str | None,
        new_hash: str | None,
        status: int | None = 409,
    ) -> None:
        self.key = key
        self.recorded_hash = recorded_hash
        self.new_hash = new_hash
        super().__init__(message, status=status)


class CanonicalJsonError(AgentLedgerError):
    """A value cannot be hashed canonically (non-string key, NaN, bytes …); names where."""

    def __init__(self, reason: str, *, path: str) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"not canonical JSON at {path}: {reason}")


class PublishError(AgentLedgerError):
    """Events were not written: their transaction aborted or the log is closed or crashed.

    ``maybe_committed`` is True when the outcome is unknown (the commit request itself failed);
    publishing the same events again is then safe only because readers skip duplicate seqs.
    """

    retryable: ClassVar[bool] = True

    def __init__(self, message: str, *, maybe_committed: bool = False) -> None:
        self.maybe_committed = maybe_committed
        super().__init__(message)


class ProducerFencedError(PublishError):
    """Another producer took this transactional id over (a newer process of the same worker)."""

    retryable: ClassVar[bool] = False


class RunLogCorruptError(RunError):
    """A run's committed records could not all be decoded; ``errors`` names every bad position."""

    def __init__(self, run_id: str, errors: list[DecodeError]) -> None:
        self.errors = errors
        where = ", ".join(f"{e.topic}[{e.partition}]@{e.offset}" for e in errors[:5])
        more = f" and {len(errors) - 5} more" if len(errors) > 5 else ""
        super().__init__(
            f"{len(errors)} undecodable record(s) at {where}{more}: {errors[0].reason}; "
            "dead-letter or repair them, the run cannot be read as is",
            run_id=run_id,
        )


# --- worker SDK -------------------------------------------------------------------------------


class PayloadError(AgentLedgerError):
    """A value cannot be recorded: it is not JSON (say where), or its blob is missing/altered."""


class UsageError(RunError):
    """The agent's code uses the SDK in a way that cannot work; the message says what to do."""


class RunClosedError(RunError):
    """The run has finished (or this handle is closed); nothing more can be written to it."""


class RunPausedError(RunError):
    """The run paused (approval asked, effect unknown …); ``reason`` says why, a human decides."""

    def __init__(self, message: str, *, run_id: str, reason: str, step: int | None = None) -> None:
        self.reason = reason
        super().__init__(message, run_id=run_id, step=step)


class StepRejectedError(RunError):
    """The step failed its acceptance check in every attempt it was given; the cursor stayed."""


class EffectFailedError(RunError):
    """The provider refused the effect (a 4xx answer, recorded as ``failed``); not retried."""

    def __init__(self, message: str, *, run_id: str, step: int, effect: str, key: str) -> None:
        self.key = key
        super().__init__(message, run_id=run_id, step=step, effect=effect)


class EventTooLargeError(PublishError):
    """An encoded event is over the producer's max request size: store its payload by reference."""

    retryable: ClassVar[bool] = False


class ViewWriteConflictError(RunError):
    """Another projector kept rewriting this run's view while we folded it; retry the batch."""

    retryable: ClassVar[bool] = True


class ViewsWipedError(AgentLedgerError):
    """A namespace's progress vanished under its writer (FLUSHALL, eviction, a deleted key):
    nothing was written, and the views must be re-projected from the log."""

    retryable: ClassVar[bool] = True

    def __init__(self, message: str, *, namespace: str) -> None:
        super().__init__(message)
        self.namespace = namespace


class ViewsRegressedError(AgentLedgerError):
    """A partition's stored progress is below what this projector last stored or read (a Redis
    failover lost the newest writes of that slot, views and progress together): nothing was
    written; the projector re-anchors on the stored progress and re-applies from the log."""

    retryable: ClassVar[bool] = True

    def __init__(self, message: str, *, namespace: str, field: str) -> None:
        super().__init__(message)
        self.namespace = namespace
        self.field = field


class RebuildWorkerError(AgentLedgerError):
    """A process folding part of a rebuild failed: the rebuilt namespace is incomplete, so it
    was deleted and never swapped in; the live views are untouched."""


class GraphStateError(RunError):
    """A LangGraph checkpoint the saver needs is not recorded, or its stored values do not chain."""
