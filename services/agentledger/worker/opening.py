"""Opening a run: start it, or resume it in the order that keeps every invariant.

Resume order: load the view behind the barrier; check versions (a refusal touches nothing);
re-validate a pending approval; take the lease with ``floor`` = the view's fence (so the new
fence beats every fence in the log even after Redis was wiped); append RunResumed first; then
resolve every open intent through ``provider.lookup`` before any step runs. A plain crash
resume leaves RunResumed queued for the run's first durable write (DESIGN.md §13).
"""

from __future__ import annotations

import structlog

from agentledger._core import versions
from agentledger._core.keys import check_names, check_run_id
from agentledger._core.leasewait import acquire_waiting
from agentledger._core.loader import load_view
from agentledger._core.session import RunSession, Services
from agentledger._core.spec import RunSpec
from agentledger._core.versions import Policy
from agentledger._core.writer import RunWriter
from agentledger.alerts.codes import APPROVAL_CODES, RUN_VERSION_DRIFT, AlertCode
from agentledger.errors import ApprovalError, RunError, RunPausedError, VersionDriftError
from agentledger.events.models import (
    FINISHED_STATUSES,
    Alert,
    PlanRevised,
    RunFinished,
    RunResumed,
    RunStarted,
)
from agentledger.leasing import LeaseKeeper
from agentledger.views import RunView
from agentledger.worker import approvals
from agentledger.worker.effects import resolve_open

_log = structlog.get_logger("agentledger.worker")


async def open_session(
    services: Services, spec: RunSpec, *, on_version_drift: Policy | None = None
) -> RunSession:
    """Start or resume ``spec.run_id``; a finished run opens read-only."""
    check_names("step", spec.plan)
    check_run_id(spec.run_id)
    if await _certainly_new(services, spec.run_id):
        return await _start(services, spec, RunView(run_id=spec.run_id))
    loaded = await load_view(
        services.log, spec.run_id, reader=services.views, barrier_s=services.barrier_s
    )
    view = loaded.view
    if view.status in FINISHED_STATUSES:
        return RunSession(services, spec, view, writer=None, keeper=None, source=loaded.source)
    if view.status == "new":
        return await _start(services, spec, view)
    return await _resume(services, spec, view, loaded.source, on_version_drift)


async def _certainly_new(services: Services, run_id: str) -> bool:
    """True when the run index says no event of ``run_id`` can be in the log (no log read).

    The claim is made before anything of the run is written. A wiped index is vouched for
    again only by a log that was never written to (then this run is new too); once the log is
    found written, this process stops asking it and every unsure open reads the log.
    """
    runs = services.runs
    if runs is None:
        return False
    claim = await runs.claim(run_id)
    if claim != "unsure":
        return claim == "new"
    if services.log_written:
        return False
    if await services.log.never_written():
        await runs.vouch()
        return True
    services.log_written = True
    return False


async def _take(services: Services, view: RunView) -> tuple[RunWriter, LeaseKeeper]:
    """Acquire the lease above every fence the log has seen, and keep it renewed."""
    lease = await acquire_waiting(
        services.leases,
        view.run_id,
        services.worker_id,
        services.lease_ttl_ms,
        floor=view.fence,
        wait_s=services.lease_wait_s,
        log=_log,
    )
    keeper = LeaseKeeper(services.leases, lease, services.lease_ttl_ms, release_on_exit=False)
    await keeper.__aenter__()
    writer = RunWriter(
        services.log,
        view,
        fence=lease.fence,
        worker_id=services.worker_id,
        clock=services.clock,
        before_publish=keeper.ensure_held,
        after_commit=services.metrics.committed if services.metrics is not None else None,
    )
    return writer, keeper


async def _start(services: Services, spec: RunSpec, view: RunView) -> RunSession:
    """A new run: RunStarted is queued and commits with the first step's first write."""
    writer, keeper = await _take(services, view)
    limits = spec.limits
    writer.append(
        RunStarted,
        agent=spec.agent,
        plan=list(spec.plan),
        input_json=services.payloads.inline(spec.input),
        code_version=spec.versions.code,
        prompt_version=spec.versions.prompt,
        tool_schema_version=spec.versions.tool_schema,
        model_version=spec.versions.model,
        version_policy=spec.version_policy,
        generation=spec.generation,
        max_tokens=limits.tokens,
        max_usd=limits.usd,
        max_steps=limits.steps,
        max_consecutive_errors=limits.consecutive_errors,
        deadline_at=limits.deadline_at,
    )
    return RunSession(services, spec, view, writer=writer, keeper=keeper, source="new")


async def _refuse(services: Services, view: RunView, code: AlertCode, summary: str) -> None:
    """Publish an alert about a run this worker will not touch (no lease, no run event)."""
    await services.log.publish(
        [
            Alert(
                alert_id=f"{code.code}:{view.run_id}:",
                code=code.code,
                severity=code.severity,
                action=code.action,
                source="worker",
                run_id=view.run_id,
                worker_id=services.worker_id,
                summary=services.payloads.text(summary),
                occurred_at=services.clock(),
            )
        ]
    )


async def _resume(
    services: Services,
    spec: RunSpec,
    view: RunView,
    source: str,
    on_version_drift: Policy | None,
) -> RunSession:
    run_id = spec.run_id
    if view.agent and view.agent != spec.agent:
        msg = f"the run belongs to agent {view.agent!r}, not {spec.agent!r}"
        raise RunError(msg, run_id=run_id)
    policy = on_version_drift or view.version_policy
    decision = versions.decide(view.versions, spec.versions, policy)
    if decision.refused:
        what = versions.describe(decision.changes)
        summary = f"run {run_id} refused to resume under other versions: {what}"
        await _refuse(services, view, RUN_VERSION_DRIFT, summary)
        raise VersionDriftError(
            f"started under other versions ({what}); policy {policy!r} refuses to resume it "
            "(resume with on_version_drift='continue' or 'replan' to override)",
            run_id=run_id,
        )
    verdict = _approval_verdict(services, view)
    if verdict is not None and verdict.status == "pending":
        step = view.pause.step if view.pause is not None else None
        raise RunPausedError(
            "still waiting for approval", run_id=run_id, reason="approval", step=step
        )
    if verdict is not None and verdict.status not in {"approved", "rejected"}:
        summary = f"run {run_id}: approval refused on resume ({verdict.reason})"
        await _refuse(services, view, APPROVAL_CODES[verdict.status], summary)
        raise ApprovalError(f"approval refused on resume: {verdict.reason}", run_id=run_id)
    writer, keeper = await _take(services, view)
    session = RunSession(services, spec, view, writer=writer, keeper=keeper, source=source)
    try:
        await _claim(session, view, decision, verdict)
    except BaseException:
        await keeper.stop()
        await services.leases.release(keeper.lease)
        raise
    return session


def _approval_verdict(services: Services, view: RunView) -> approvals.ApprovalVerdict | None:
    """Re-validate the approval a paused run waits for (None when it waits for none)."""
    pause = view.pause
    if view.status != "paused" or pause is None or pause.reason != "approval":
        return None
    if pause.intent_hash is None:
        return None
    return approvals.validate(
        view.approvals,
        generation=view.generation,
        intent_hash=pause.intent_hash,
        now=services.clock(),
        asked_expires_at=pause.expires_at,
    )


async def _claim(
    session: RunSession,
    before: RunView,
    decision: versions.VersionDecision,
    verdict: approvals.ApprovalVerdict | None,
) -> None:
    """RunResumed first, then the re-plan, a rejection, and every open intent resolved."""
    writer = session.writer  # not writable(): the run may be paused until RunResumed is appended
    if writer is None:
        raise RunError("a resume needs a writer", run_id=session.run_id)
    spec = session.spec
    # ``before`` is the writer's view, folded in place: read what we need before appending
    pause = before.pause
    open_effects = before.open_effects()
    previous_fence, cursor, plan_version = before.fence, before.cursor, before.plan_version
    writer.append(
        RunResumed,
        previous_fence=previous_fence,
        reason=f"resumed at step {cursor}"
        + (f" after pause ({pause.reason})" if pause is not None else ""),
        code_version=spec.versions.code,
        prompt_version=spec.versions.prompt,
        tool_schema_version=spec.versions.tool_schema,
        model_version=spec.versions.model,
        policy_applied=decision.policy,
    )
    if decision.policy == "replan":
        writer.append(
            PlanRevised,
            plan=list(spec.plan),
            plan_version=plan_version + 1,
            from_step=cursor,
            reason=f"versions changed: {versions.describe(decision.changes)}",
        )
    if verdict is not None and verdict.status == "rejected":
        reason = session.services.payloads.text(verdict.reason)
        writer.append(RunFinished, status="rejected", error=reason)
        await writer.flush()
        raise ApprovalError(f"the approval was rejected: {verdict.reason}", run_id=spec.run_id)
    for effect in open_effects:
        await resolve_open(session, effect)
    queued = _rides_with_next_write(writer, decision, resumed_from_pause=pause is not None)
    if queued:
        session.kill_point("resume_pending")
    else:
        await writer.flush()
    _log.info(
        "run_resumed",
        run_id=spec.run_id,
        cursor=cursor,
        fence=writer.fence,
        resolved=len(open_effects),
        source=session.source,
        queued=queued,
    )


def _rides_with_next_write(
    writer: RunWriter, decision: versions.VersionDecision, *, resumed_from_pause: bool
) -> bool:
    """True when RunResumed may wait for the run's first durable write (DESIGN.md §13).

    Only a crash resume with nothing else to say: the run was running (not paused, whose end
    the console and the reconciler's pause checks read from the log), under the same versions
    (a drift is recorded at once, invariant 7), and RunResumed is all that is queued (an open
    intent's resolution commits now, as before). What it records then is only the takeover,
    which the new fence on every later event records as well; a crash before the first write
    leaves the log as the previous writer left it, and the next resume starts from there.
    """
    if resumed_from_pause or decision.changes:
        return False
    return len(writer.pending) == 1 and isinstance(writer.pending[0], RunResumed)
