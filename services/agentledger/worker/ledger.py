"""The Ledger: what an agent author constructs once per worker and opens runs with."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager

from agentledger._core.blobs import FileBlobStore
from agentledger._core.killswitch import KillSwitch
from agentledger._core.payloads import Payloads
from agentledger._core.session import RunSession, Services
from agentledger._core.settings import WorkerSettings, default_worker_id
from agentledger._core.spec import RunSpec
from agentledger._core.versions import Policy
from agentledger._core.writer import Checkpoints
from agentledger.bus.port import EventLog
from agentledger.errors import AgentLedgerError
from agentledger.events.models import ApprovalDecided, Decision, Event, now_ms
from agentledger.leases import LeaseStore
from agentledger.leasing.run_index import RunIndex
from agentledger.logdefaults import logs_on_stderr_by_default
from agentledger.providers.hashing import EffectHasher
from agentledger.providers.protocol import Provider
from agentledger.telemetry.tracing import run_span, set_outcome
from agentledger.telemetry.worker_metrics import WorkerMetrics
from agentledger.views.store import ViewReader
from agentledger.worker.decisions import decide
from agentledger.worker.opening import open_session
from agentledger.worker.run import Run


class Ledger:
    """Opens runs against an event log, a lease store and named providers.

    The ledger does not own its ports: open and close them around it (``async with``).
    """

    def __init__(
        self,
        *,
        log: EventLog,
        leases: LeaseStore,
        providers: Mapping[str, Provider],
        views: ViewReader | None = None,
        payloads: Payloads | None = None,
        kill_switch: KillSwitch | None = None,
        worker_id: str | None = None,
        lease_ttl_ms: int = 15_000,
        barrier_s: float = 0.0,
        lease_wait_s: float = 0.0,
        clock: Callable[[], int] = now_ms,
        checkpoints: Checkpoints = "each_step",
        runs: RunIndex | None = None,
        metrics: WorkerMetrics | None = None,
    ) -> None:
        logs_on_stderr_by_default()
        self.services = Services(
            log=log,
            leases=leases,
            providers=dict(providers),
            payloads=payloads or Payloads(),
            kill=kill_switch or KillSwitch(),
            clock=clock,
            worker_id=worker_id or default_worker_id(),
            lease_ttl_ms=lease_ttl_ms,
            views=views,
            barrier_s=barrier_s,
            checkpoints=checkpoints,
            runs=runs,
            metrics=metrics,
            lease_wait_s=lease_wait_s,
        )

    @classmethod
    def from_settings(
        cls,
        settings: WorkerSettings,
        *,
        log: EventLog,
        leases: LeaseStore,
        providers: Mapping[str, Provider],
        views: ViewReader | None = None,
        metrics: WorkerMetrics | None = None,
        runs: RunIndex | None = None,
    ) -> Ledger:
        """A ledger with the worker id, lease ttl and wait, barrier, blob store, kill switch and
        checkpoint mode of ``settings``; ``runs`` is used only with ``settings.run_index``."""
        blobs = FileBlobStore(settings.blob_dir) if settings.blob_dir is not None else None
        return cls(
            log=log,
            leases=leases,
            providers=providers,
            views=views,
            payloads=Payloads(
                blobs=blobs,
                threshold=settings.blob_threshold_bytes,
                hasher=EffectHasher(settings.hash_key.get_secret_value()),
            ),
            kill_switch=KillSwitch(settings.kill_point, settings.kill_hit),
            worker_id=settings.worker_id,
            lease_ttl_ms=settings.lease_ttl_ms,
            barrier_s=settings.resume_barrier_s,
            checkpoints=settings.checkpoints,
            runs=runs if settings.run_index else None,
            metrics=metrics,
            lease_wait_s=settings.lease_wait_s,
        )

    @property
    def worker_id(self) -> str:
        """The id stamped on every event this ledger writes."""
        return self.services.worker_id

    @asynccontextmanager
    async def run(
        self, spec: RunSpec, *, on_version_drift: Policy | None = None
    ) -> AsyncIterator[Run]:
        """Start ``spec.run_id`` or resume it where it stopped; finished runs open read-only.

        On a clean exit, a run whose whole plan is checkpointed is finished (succeeded, with
        the last step's result) unless :meth:`Run.finish` was called. An exception leaves the
        run resumable and releases the lease; a crash (a BaseException such as cancellation
        or a simulated kill) writes nothing more and leaves the lease to expire.
        """
        attrs = {"agentledger.agent": spec.agent}
        with run_span("agentledger.run.open", spec.run_id, attrs) as span:
            session = await open_session(self.services, spec, on_version_drift=on_version_drift)
            mode = _mode(session)
            span.update_name(f"agentledger.run.{mode}")
            span.set_attribute("agentledger.run.mode", mode)
            if self.services.metrics is not None:
                self.services.metrics.runs.labels(mode=mode).inc()
            crashed = False
            try:
                yield Run(session)
                await _finish_if_done(session)
            except Exception:
                await _commit_queued(session)
                raise
            except BaseException:
                crashed = True
                raise
            finally:
                await _close(session, release=not crashed)
            set_outcome(span, session.view.status)

    async def decide(
        self,
        run_id: str,
        decision: Decision,
        *,
        approver: str,
        intent_hash: str | None = None,
        expires_at: int | None = None,
        note: str = "",
        also: Sequence[Event] = (),
    ) -> ApprovalDecided:
        """Record approved/rejected/revoked for what the paused run asks (or ``intent_hash``);
        ``also`` (e.g. a ResumeRequested) is written in the same transaction."""
        return await decide(
            self.services,
            run_id,
            decision,
            approver=approver,
            intent_hash=intent_hash,
            expires_at=expires_at,
            note=note,
            also=also,
        )


def _mode(session: RunSession) -> str:
    """``open`` for a new run, ``resume`` for one with events, ``read`` for a finished one."""
    if session.writer is None:
        return "read"
    return "open" if session.source == "new" else "resume"


async def _finish_if_done(session: RunSession) -> None:
    view = session.view
    if session.writer is None or session.finished or view.status == "paused":
        return
    if view.cursor >= len(view.plan) and session.writer.broken is None:
        await Run(session).finish(session.last_result)
    elif session.writer.pending and session.writer.broken is None:
        await session.writer.flush()


async def _commit_queued(session: RunSession) -> None:
    """On an ordinary exception, commit the checkpoints still queued (with_next_commit) so that
    the steps that returned are not run again; a failure here must not hide the exception."""
    writer = session.writer
    if writer is None or not writer.pending or writer.broken is not None:
        return
    if session.services.checkpoints != "with_next_commit":
        return
    try:
        session.ensure_lease()
        await writer.flush()
    except AgentLedgerError as e:
        session.log.warning("queued_checkpoints_lost", error=f"{type(e).__name__}: {e}")


async def _close(session: RunSession, *, release: bool) -> None:
    """Stop renewing the lease; release it unless the run crashed or the lease was lost."""
    keeper = session.keeper
    if keeper is None:
        return
    lost = keeper.lost.is_set()
    await keeper.stop()
    if release and not lost:
        await session.services.leases.release(keeper.lease)
