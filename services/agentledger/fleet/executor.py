"""Executing one run request: start or resume the run through the SDK, and say how it ended.

A request is *settled* (its offset may be committed) as soon as its run has a durable write, or
when it turns out to need nothing. A run whose lease is lost (renewal refused, or its writes
rejected by fence) is abandoned at once, with an alert naming this worker. Transient failures
are retried here a few times, then the request is published again for the fleet.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from agentledger._core.loader import load_view
from agentledger.alerts.codes import AlertCode
from agentledger.bus.port import EventPublisher
from agentledger.errors import (
    AgentLedgerError,
    ApprovalError,
    BudgetExceededError,
    EffectFailedError,
    EffectUnknownError,
    IdentityMismatchError,
    LeaseHeldError,
    ProducerFencedError,
    PublishError,
    ReplayMismatchError,
    RunClosedError,
    RunError,
    RunPausedError,
    StaleFenceError,
    StepRejectedError,
    UnreachableError,
    VersionDriftError,
)
from agentledger.events.models import (
    FINISHED_STATUSES,
    ResumeRequested,
    RunRequested,
    new_event_id,
    now_ms,
)
from agentledger.fleet.agent import Agent
from agentledger.fleet.alerts import FENCE_STALE, LEASE_LOST, lease_lost_alert
from agentledger.fleet.settings import FleetSettings
from agentledger.fleet.stable import StableBarrier
from agentledger.fleet.tap import DurableTap
from agentledger.leases import LeaseStore
from agentledger.views import RunView
from agentledger.views.store import ViewReader
from agentledger.worker import Ledger, Run

_log = structlog.get_logger("agentledger.fleet")
RunRequest = RunRequested | ResumeRequested
#: Failures of the agent's own logic: the run is failed for good (fork it to try again).
_AGENT_FAILURES = (StepRejectedError, EffectFailedError, ReplayMismatchError)
#: Outcomes the SDK already recorded (pause, finish, alert); the request is done.
_RECORDED = (
    RunPausedError,
    EffectUnknownError,
    IdentityMismatchError,
    ApprovalError,
    VersionDriftError,
    BudgetExceededError,
    RunClosedError,
)


class _LeaseLostError(StaleFenceError):
    """The keeper saw the lease go while the body ran (not a rejected write)."""


@dataclass(frozen=True)
class Outcome:
    """How a request ended, for logs and tests: ``status`` is one word, ``detail`` a sentence."""

    status: str
    detail: str = ""


class RunExecutor:
    """Runs requests of one agent on one ledger (shared by every run of the worker)."""

    def __init__(
        self,
        settings: FleetSettings,
        *,
        agent: Agent,
        ledger: Ledger,
        tap: DurableTap,
        leases: LeaseStore,
        publisher: EventPublisher,
        views: ViewReader | None = None,
        barrier: StableBarrier | None = None,
    ) -> None:
        self._settings = settings
        self._agent = agent
        self._ledger = ledger
        self._tap = tap
        self._leases = leases
        self._publisher = publisher
        self._views = views
        self._barrier = barrier
        self.worker_id = ledger.worker_id

    async def execute(self, request: RunRequest, settle: Callable[[], None]) -> Outcome:
        """Carry ``request`` out; ``settle`` is called once losing the request cannot lose the
        run. ProducerFencedError (this worker must stop) propagates."""
        run_id = request.run_id
        if isinstance(request, RunRequested) and request.agent != self._agent.name:
            settle()
            return Outcome("skipped", f"for agent {request.agent!r}")
        watcher = asyncio.get_running_loop().create_task(
            _settle_when(self._tap.durable(run_id), settle), name=f"settle:{run_id}"
        )
        try:
            outcome = await self._attempts(request)
        finally:
            await _cancel(watcher)
            self._tap.forget(run_id)
        settle()
        return outcome

    async def _attempts(self, request: RunRequest) -> Outcome:
        s = self._settings
        log = _log.bind(run_id=request.run_id, worker_id=self.worker_id)
        for attempt in range(s.fleet_run_retries + 1):
            try:
                return await self._once(request)
            except ProducerFencedError:
                raise
            except (PublishError, UnreachableError, LeaseHeldError) as e:
                log.warning("run_attempt_failed", attempt=attempt + 1, error=str(e))
                await asyncio.sleep(s.fleet_retry_backoff_ms / 1000 * 2**attempt)
        again = request.model_copy(update={"event_id": new_event_id(), "occurred_at": now_ms()})
        await self._publisher.publish([again])
        log.warning("run_requeued", retries=s.fleet_run_retries)
        return Outcome("requeued", f"gave up after {s.fleet_run_retries + 1} attempts")

    async def _once(self, request: RunRequest) -> Outcome:
        run_id = request.run_id
        if self._barrier is not None:
            await self._barrier.wait(run_id)
        prepared = await self._prepare(request)
        if isinstance(prepared, Outcome):
            return prepared
        view, raw = prepared
        holder: list[Run] = []
        try:
            return await self._open_and_walk(run_id, raw, holder)
        except StaleFenceError as e:
            return await self._abandon(run_id, holder, e)
        except LeaseHeldError:
            if view is None or view.status == "new":
                raise
            return Outcome("held", "another writer took the lease first")
        except _RECORDED as e:
            return Outcome(_recorded_status(e), str(e))
        except RunError as e:
            if type(e) is not RunError:  # only the SDK's "belongs to another agent"
                raise
            return Outcome("skipped", str(e))

    async def _open_and_walk(self, run_id: str, raw: str, holder: list[Run]) -> Outcome:
        async with self._ledger.run(self._agent.spec(run_id, json.loads(raw))) as run:
            holder.append(run)
            if run.status in FINISHED_STATUSES:
                return Outcome("done", f"already {run.status}")
            # a request for a run that exists walks it with its recorded input
            await self._walk(run, json.loads(run.view.input_json))
        return Outcome(run.status)

    async def _prepare(self, request: RunRequest) -> tuple[RunView | None, str] | Outcome:
        """The view (when one is needed) and the input to start with, or why nothing is to do.

        A start needs no view of its own (the SDK loads one): only a resume (for the input) or
        a run another worker holds (to tell its first write from later ones) does.
        """
        raw = request.input_json if isinstance(request, RunRequested) else "null"
        if isinstance(request, RunRequested) and not await self._lease_elsewhere(request.run_id):
            return None, raw
        view = await self._peek(request.run_id)
        skip = self._needless(request, view) or await self._held_elsewhere(view)
        if skip is not None:
            return skip
        return view, raw if view.status == "new" else view.input_json

    async def _peek(self, run_id: str) -> RunView:
        """The run as the views know it, if they know it (its agent, input and a finished
        status never change; the SDK reads the run behind its barrier later); else the fold of
        the log."""
        if self._views is not None:
            seen = await self._views.load(run_id)
            if seen is not None:
                return seen
        loaded = await load_view(
            self._tap, run_id, reader=self._views, barrier_s=self._settings.resume_barrier_s
        )
        return loaded.view

    async def _lease_elsewhere(self, run_id: str) -> bool:
        lease = await self._leases.current(run_id)
        return lease is not None and lease.owner != self.worker_id

    def _needless(self, request: RunRequest, view: RunView) -> Outcome | None:
        """Why the request needs nothing from this worker (None if it does)."""
        if view.status in FINISHED_STATUSES:
            return Outcome("done", f"already {view.status}")
        if view.status == "new" and isinstance(request, ResumeRequested):
            return Outcome("skipped", "the run has no events to resume")
        if view.status != "new" and view.agent != self._agent.name:
            return Outcome("skipped", f"the run belongs to agent {view.agent!r}")
        return None

    async def _held_elsewhere(self, view: RunView) -> Outcome | None:
        """A live lease of another owner: a run with events is theirs (or, if they die, the
        reconciler's); a run with none waits for that lease to end, as nobody else would
        notice it."""
        lease = await self._leases.current(view.run_id)
        if lease is None or lease.owner == self.worker_id:
            return None
        if view.status != "new":
            return Outcome("held", f"held by {lease.owner} (fence {lease.fence})")
        raise LeaseHeldError(
            f"held by {lease.owner} before its first write; retrying after it expires",
            run_id=view.run_id,
        )

    async def _walk(self, run: Run, value: Any) -> None:
        """The agent's body, abandoned once the lease is known lost; agent failures fail the
        run for good."""
        loop = asyncio.get_running_loop()

        async def walk() -> Any:
            return await self._agent.body(run, value)

        body = loop.create_task(walk(), name=f"body:{run.run_id}")
        lost = run.lease_lost
        waiter = loop.create_task(lost.wait()) if lost is not None else None
        try:
            await asyncio.wait(
                [t for t in (body, waiter) if t is not None], return_when=asyncio.FIRST_COMPLETED
            )
            if not body.done():
                await self._alert(run.run_id, run.view.fence, LEASE_LOST, "renewal refused")
                # The SDK refuses every write without the lease, so the body stops at its next
                # one; a body busy elsewhere (a long model call) is cancelled after a grace.
                # Not at once: cancelling a publish the group commit is checking could fail
                # the other runs sharing that commit.
                await asyncio.wait([body], timeout=self._settings.lease_ttl_ms / 1000)
        finally:
            await _cancel(body)
            if waiter is not None:
                await _cancel(waiter)
        error = None if body.cancelled() else body.exception()
        if body.cancelled() or (error is not None and lost is not None and lost.is_set()):
            msg = f"lease of {self.worker_id} was lost while the run was going"
            raise _LeaseLostError(msg, run_id=run.run_id)
        if error is None:
            return
        if isinstance(error, _AGENT_FAILURES) or not isinstance(error, AgentLedgerError):
            if not isinstance(error, Exception):
                raise error
            await run.fail(f"{type(error).__name__}: {error}")
            return
        raise error

    async def _abandon(self, run_id: str, holder: list[Run], error: StaleFenceError) -> Outcome:
        fence = holder[0].view.fence if holder else None
        if not isinstance(error, _LeaseLostError):  # a lost lease was alerted as it was seen
            await self._alert(run_id, fence, FENCE_STALE, str(error))
        _log.warning("run_abandoned", run_id=run_id, worker_id=self.worker_id, fence=fence,
                     reason=str(error))  # fmt: skip
        return Outcome("abandoned", str(error))

    async def _alert(self, run_id: str, fence: int | None, code: AlertCode, reason: str) -> None:
        alert = lease_lost_alert(
            code, run_id=run_id, worker_id=self.worker_id, fence=fence, reason=reason
        )
        try:
            await self._publisher.publish([alert])
        except PublishError as e:
            _log.error("alert_publish_failed", run_id=run_id, code=code.code, error=str(e))


async def _settle_when(durable: asyncio.Event, settle: Callable[[], None]) -> None:
    await durable.wait()
    settle()


def _recorded_status(error: AgentLedgerError) -> str:
    if isinstance(error, RunPausedError | EffectUnknownError | IdentityMismatchError):
        return "paused"
    if isinstance(error, BudgetExceededError):
        return "budget_exceeded"
    if isinstance(error, ApprovalError | VersionDriftError):
        return "refused"
    return "closed"


async def _cancel(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` if still running and wait until it has ended."""
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
