"""The run an agent author walks: steps checkpointed only after acceptance (invariant 1)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from agentledger._core import budget
from agentledger._core.keys import check_name
from agentledger._core.payloads import Recorded, dumps, loads
from agentledger._core.replay import check_step
from agentledger._core.session import RunSession
from agentledger._core.spec import Check, EffectResult
from agentledger._core.writer import MAX_DEFERRED_EVENTS
from agentledger.errors import (
    AgentLedgerError,
    ApprovalError,
    BudgetExceededError,
    EffectUnknownError,
    IdentityMismatchError,
    PayloadError,
    PublishError,
    ReplayMismatchError,
    RunClosedError,
    RunError,
    RunPausedError,
    StaleFenceError,
    StepRejectedError,
    UnreachableError,
    UsageError,
    VersionDriftError,
)
from agentledger.events.models import (
    AcceptanceEvaluated,
    PlanRevised,
    RunFinished,
    StepCheckpointed,
    StepRejected,
    StepStarted,
)
from agentledger.telemetry.tracing import STEP, STEP_NAME, child_span, outcome_of, set_outcome
from agentledger.views import RunView
from agentledger.worker.step import Step

StepBody = Callable[[Step], Awaitable[Any]]
AcceptResult = bool | Check | Sequence[Check]
Accept = Callable[[Any], AcceptResult | Awaitable[AcceptResult]]

#: Errors that already wrote what they had to (pause, finish, nothing) and end the step as is.
_TERMINAL: tuple[type[AgentLedgerError], ...] = (
    BudgetExceededError,
    EffectUnknownError,
    IdentityMismatchError,
    RunPausedError,
    ApprovalError,
    StaleFenceError,
    ReplayMismatchError,
    VersionDriftError,
    RunClosedError,
    PublishError,
    UsageError,
    # Kafka or Redis stayed unreachable past the outage budget: nothing more can be written
    # now, and the run is resumed from the log once the dependency is back.
    UnreachableError,
)


async def _evaluate(
    accept: Accept | None, value: Any, *, run_id: str, step: int, name: str
) -> list[Check]:
    """Run the acceptance check. Without one there is nothing to evaluate and nothing to
    record: the checkpoint alone says the step completed (an AcceptanceEvaluated record per
    step would add a third topic, its batch and its commit marker, to every step's commit)."""
    if accept is None:
        return []
    outcome = accept(value)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    if outcome is None:
        msg = (
            f"the accept= check of step {name!r} returned None: return True or False, a Check, "
            "or a list of Checks (a lambda's expression, or a `return` the function lacks)"
        )
        raise UsageError(msg, run_id=run_id, step=step)
    if isinstance(outcome, bool):
        return [Check("accept", passed=outcome)]
    if isinstance(outcome, Check):
        return [outcome]
    if not isinstance(outcome, Iterable) or isinstance(outcome, str | bytes | Mapping):
        msg = (
            f"the accept= check of step {name!r} returned {type(outcome).__name__}: return "
            "True or False, a Check, or a list of Checks"
        )
        raise UsageError(msg, run_id=run_id, step=step)
    checks = list(outcome)
    if not all(isinstance(c, Check) for c in checks):
        msg = f"the accept= check of step {name!r} returned a list with items that are not Checks"
        raise UsageError(msg, run_id=run_id, step=step)
    if not checks:
        return [Check("accept", passed=False, detail="the check returned no result")]
    return checks


async def _encode_result(session: RunSession, index: int, name: str, raw: Any) -> Recorded:
    """The step's result as recorded; a value that cannot be recorded is a UsageError."""
    if isinstance(raw, EffectResult):
        msg = (
            f"step {name!r} returned the EffectResult of effect {raw.effect!r}: return what the "
            "run needs from it as JSON, e.g. done.external_ref or {'ref': done.external_ref}"
        )
        raise UsageError(msg, run_id=session.run_id, step=index)
    try:
        return await session.services.payloads.record(raw)
    except PayloadError as e:
        msg = f"step {name!r} returned a value that cannot be recorded as JSON: {e}"
        raise UsageError(msg, run_id=session.run_id, step=index) from e


def _as_recorded(session: RunSession, result: Any) -> str | None:
    """The last step's recorded JSON when ``result`` is that step's value, unchanged: it was
    redacted when the step was checkpointed, and redacting it again only costs time."""
    recorded = session.last_result_json
    if recorded is None or result is not session.last_result:
        return None
    try:
        return recorded if dumps(result) == recorded else None
    except PayloadError:
        return None


class Run:
    """An open run. Call :meth:`step` for each step of the plan, in order.

    A step already checkpointed returns its recorded result without running; a step whose
    attempt crashed continues that attempt (recorded activities reused, effects never
    repeated); any other step runs a new attempt. Values returned are always the recorded ones.

    Properties (``status``, ``input``, ``result`` …) read what the handle holds and never wait;
    the methods that write or wait (``step``, ``finish``, ``sync`` …) are coroutines.
    """

    def __init__(self, session: RunSession) -> None:
        self._session = session

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self._session.run_id

    @property
    def view(self) -> RunView:
        """The run's resume view as this writer knows it (do not modify)."""
        return self._session.settled_view

    @property
    def status(self) -> str:
        """running, paused, succeeded, failed, rejected, budget_exceeded or cancelled."""
        return self._session.view.status

    @property
    def resumed_from(self) -> str:
        """Where the view came from: ``new``, ``views`` (Redis) or ``log`` (Kafka fold)."""
        return self._session.source

    @property
    def lease_lost(self) -> asyncio.Event | None:
        """Set once this writer's lease is known lost (renewal refused or impossible for a ttl);
        None for a read-only handle. A fleet watches it to abandon the run at once."""
        keeper = self._session.keeper
        return keeper.lost if keeper is not None else None

    @property
    def commits(self) -> int:
        """Transactions this handle committed (for measurements)."""
        writer = self._session.writer
        return writer.commits if writer is not None else 0

    @property
    def input(self) -> Any:
        """The run's input as recorded in RunStarted (redacted): what a resumed run must use."""
        return loads(self.view.input_json)  # RunStarted's input is always inline

    @property
    def result(self) -> Any:
        """The recorded final result once the run succeeded (None before, or if it did not)."""
        return loads(self.view.result_json)  # RunFinished's result is always inline

    async def step(
        self, name: str, body: StepBody, *, accept: Accept | None = None, attempts: int = 1
    ) -> Any:
        """Run (or replay) the next step; return its recorded result.

        The result is checkpointed only when every check of ``accept`` passes; a failed check
        writes StepRejected (cursor unchanged) and tries again, up to ``attempts`` attempts,
        then raises StepRejectedError. An error in ``body`` writes StepRejected and propagates.
        """
        session = self._session
        check_name("step", name)
        if session.in_step:
            raise RunError("steps cannot be nested", run_id=self.run_id)
        index = session.next_index
        attrs = {STEP: index, STEP_NAME: name}
        metrics = session.services.metrics
        started = time.monotonic()
        outcome = "error"
        with child_span("agentledger.step", self.run_id, attrs) as span:
            try:
                check_step(session.view, index, name)
                recorded = session.view.steps.get(index)
                if recorded is not None and recorded.status == "checkpointed":
                    session.next_index += 1
                    value = await session.services.payloads.decode(
                        recorded.result_json, recorded.result_ref_uri, recorded.result_ref_hash
                    )
                    session.last_result = value
                    session.last_result_json = (
                        recorded.result_json if recorded.result_ref_uri is None else None
                    )
                    outcome = "replayed"
                    return value
                session.in_step = True
                try:
                    value = await self._attempts(index, name, body, accept, attempts)
                finally:
                    session.in_step = False
                outcome = "checkpointed"
                return value
            except BaseException as e:
                outcome = outcome_of(e)
                raise
            finally:
                set_outcome(span, outcome)
                if metrics is not None:
                    metrics.step_seconds.labels(outcome=outcome).observe(time.monotonic() - started)

    async def _attempts(
        self, index: int, name: str, body: StepBody, accept: Accept | None, attempts: int
    ) -> Any:
        session = self._session
        reasons: list[str] = []
        for _ in range(max(attempts, 1)):
            value, reason = await self._attempt(index, name, body, accept)
            if reason is None:
                session.next_index += 1
                session.last_result = value
                return value
            reasons.append(reason)
        msg = f"step {name!r} failed acceptance in {len(reasons)} attempt(s): {reasons[-1]}"
        raise StepRejectedError(msg, run_id=self.run_id, step=index)

    def _begin(self, index: int, name: str) -> int:
        """Continue the crashed attempt of this step, or start a new one; return its number."""
        session = self._session
        writer = session.writable()
        recorded = session.view.steps.get(index)
        if recorded is not None and recorded.status == "started" and recorded.attempts > 0:
            return recorded.attempt
        attempt = recorded.attempt + 1 if recorded is not None else 1
        writer.append(StepStarted, step=index, step_name=name, attempt=attempt)
        return attempt

    async def _attempt(
        self, index: int, name: str, body: StepBody, accept: Accept | None
    ) -> tuple[Any, str | None]:
        """One attempt: body, acceptance, then checkpoint or rejection in one commit."""
        session = self._session
        payloads = session.services.payloads
        recorded = session.view.steps.get(index)
        continuing = recorded is not None and recorded.status == "started"
        overrun = (
            budget.before_spending(session.view.budget, session.now())
            if continuing
            else budget.before_attempt(session.view.budget, session.now())
        )
        if overrun is not None:
            raise await session.exceed(overrun, index)
        attempt = self._begin(index, name)
        writer = session.writable()
        session.kill_point("step")
        step = Step(session, index, name, attempt)
        try:
            raw = await body(step)
            recorded_result = await _encode_result(session, index, name, raw)
            encoded = recorded_result.encoded
            value = await payloads.value_of(recorded_result)  # as decoded from the record
            checks = await _evaluate(accept, value, run_id=self.run_id, step=index, name=name)
        except _TERMINAL:
            raise
        except Exception as e:
            reason = payloads.text(f"{type(e).__name__}: {e}")
            writer.append(StepRejected, step=index, step_name=name, attempt=attempt, reason=reason)
            session.ensure_lease()
            await writer.flush()
            step.log.warning("step_failed", error=reason)
            raise
        for check in checks:
            writer.append(
                AcceptanceEvaluated,
                step=index,
                attempt=attempt,
                check=payloads.text(check.name),
                passed=check.passed,
                detail=payloads.text(check.detail),
            )
        failed = [c for c in checks if not c.passed]
        if failed:
            reason = "failed checks: " + ", ".join(
                f"{c.name} ({c.detail})" if c.detail else c.name for c in failed
            )
            reason = payloads.text(
                reason
            )  # check details are free text: redacted for log and event
            writer.append(
                StepRejected,
                step=index,
                step_name=name,
                attempt=attempt,
                reason=reason,
                result_json=encoded.json,
            )
            session.ensure_lease()
            await writer.flush()
            step.log.info("step_rejected", reason=reason)
            return None, reason
        session.kill_point("before_checkpoint")
        session.last_result_json = encoded.json if encoded.ref_uri is None else None
        writer.append(
            StepCheckpointed,
            step=index,
            step_name=name,
            attempt=attempt,
            result_json=encoded.json,
            result_ref_uri=encoded.ref_uri,
            result_ref_hash=encoded.ref_hash,
        )
        if session.services.checkpoints == "with_next_commit":
            # Rides with the run's next durable write (the next intent at the latest); a crash
            # before it is a crash at before_checkpoint: the attempt is continued on resume.
            if len(writer.pending) >= MAX_DEFERRED_EVENTS:
                session.ensure_lease()
                await writer.flush()
            session.kill_point("checkpoint_pending")
            # step.log's event (its fields, in its order), without binding a logger for a line
            # below the usual level (DESIGN.md §13, session 19)
            session.log.debug("step_checkpoint_queued", step=index, step_name=name, attempt=attempt)
            return value, None
        session.ensure_lease()
        await writer.flush()
        session.kill_point("after_checkpoint")
        session.log.debug("step_checkpointed", step=index, step_name=name, attempt=attempt)
        return value, None

    async def sync(self) -> None:
        """Commit what is queued now (with ``checkpoints="with_next_commit"``, the checkpoints
        of the steps that returned since the last commit); nothing to do otherwise."""
        session = self._session
        writer = session.writer
        if writer is None or not writer.pending:
            return
        session.ensure_lease()
        await writer.flush()

    async def revise_plan(self, plan: Sequence[str], reason: str) -> None:
        """Replace the plan from the current step on (PlanRevised); earlier steps keep theirs."""
        session = self._session
        for name in plan:
            check_name("step", name)
        writer = session.writable()
        writer.append(
            PlanRevised,
            plan=list(plan),
            plan_version=session.view.plan_version + 1,
            from_step=session.next_index,
            reason=session.services.payloads.text(reason),
        )
        await writer.flush()

    async def finish(self, result: Any = None) -> None:
        """Record the run as succeeded with ``result`` (idempotent once finished)."""
        session = self._session
        if session.finished:
            return
        writer = session.writable()
        result_json = _as_recorded(session, result) or session.services.payloads.inline(result)
        writer.append(RunFinished, status="succeeded", result_json=result_json)
        session.ensure_lease()
        await writer.flush()

    async def fail(self, error: str) -> None:
        """Record the run as failed for good (no resume will continue it)."""
        session = self._session
        writer = session.writable()
        writer.append(RunFinished, status="failed", error=session.services.payloads.text(error))
        await writer.flush()
