"""Watching runs that are not waiting on a provider: orphans, expired pauses, overruns.

An orphan (running, no live lease, no open intent, idle past the grace period) is re-queued with
ResumeRequested — this is how the fleet gets a dead worker's runs back (DESIGN.md §5 "Fleet"): the
reconciler notices, a worker of the group picks the request up. The request is repeated once per
grace period while the ``run.orphaned`` alert stays open, and exactly one reconciler instance
sends each repeat (the alert record is the claim).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from agentledger.alerts.book import AlertBook
from agentledger.alerts.codes import RUN_ORPHANED, RUN_UNREADABLE
from agentledger.alerts.model import AlertCondition, AlertRecord
from agentledger.bus.port import EventLog
from agentledger.errors import AgentLedgerError, RunLogCorruptError
from agentledger.events.models import Alert, Event, ResumeRequested, now_ms
from agentledger.leases import Lease, LeaseStore
from agentledger.reconciler.report import PassReport
from agentledger.reconciler.scan import alerts_for, cleared
from agentledger.reconciler.settings import MAX_REDIS_IN_FLIGHT, ReconcilerSettings
from agentledger.views.model import RunView
from agentledger.views.store import ViewReader

_log = structlog.get_logger(__name__)
WATCHED_STATUSES: tuple[str, ...] = ("running", "paused")
Seen = dict[str, tuple[RunView | None, Lease | None]]


class RunWatch:
    """Raises run-level alerts, re-queues orphans, and closes alerts whose condition cleared."""

    def __init__(
        self,
        settings: ReconcilerSettings,
        *,
        log: EventLog,
        views: ViewReader,
        leases: LeaseStore,
        book: AlertBook,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._settings = settings
        self._log = log
        self._views = views
        self._leases = leases
        self._book = book
        self._clock = clock
        self._limit = asyncio.Semaphore(
            min(settings.reconciler_run_concurrency, MAX_REDIS_IN_FLIGHT)
        )

    async def scan(self, report: PassReport) -> Seen:
        """Look at every running and paused run; the views and leases seen, by run id."""
        seen: Seen = {}
        run_ids: list[str] = []
        for status in WATCHED_STATUSES:
            run_ids += await self._views.runs_by_status(
                status, limit=self._settings.reconciler_scan_limit
            )
        async with asyncio.TaskGroup() as tg:
            for run_id in dict.fromkeys(run_ids):
                tg.create_task(self._watch_run(run_id, report, seen))
        return seen

    async def settle(self, report: PassReport, seen: Seen) -> None:
        """Close every open alert whose condition no longer holds."""
        now = self._clock()
        reasons: dict[str, str] = {}
        for record in await self._book.active():
            if record.run_id is None:
                continue
            if record.run_id not in seen:
                seen[record.run_id] = await self._observe(record.run_id)
            view, lease = seen[record.run_id]
            why = cleared(
                record,
                view,
                lease,
                now,
                orphan_grace_ms=self._settings.reconciler_orphan_grace_ms,
            )
            if why is not None:
                reasons[record.key] = why
        closed = await self._book.close(reasons)
        await self._book.publish(self._log, closed)
        report.alerts_closed += len(closed)

    async def _observe(self, run_id: str) -> tuple[RunView | None, Lease | None]:
        async with self._limit:
            return await self._views.load(run_id), await self._leases.current(run_id)

    async def _watch_run(self, run_id: str, report: PassReport, seen: Seen) -> None:
        try:
            view, lease = seen[run_id] = await self._observe(run_id)
            if view is None:
                return
            conditions = alerts_for(
                view,
                self._clock(),
                lease,
                orphan_grace_ms=self._settings.reconciler_orphan_grace_ms,
            )
            await self._raise(view, conditions, report)
        except AgentLedgerError as e:
            report.errors += 1
            _log.warning("watch_run_failed", run_id=run_id, error=str(e))

    async def _raise(
        self, view: RunView, conditions: list[AlertCondition], report: PassReport
    ) -> None:
        alerts: list[Alert] = []
        requests: list[Event] = []
        for condition in conditions:
            record, opened = await self._book.sight(condition)
            alerts += opened
            if condition.code == RUN_ORPHANED.code and await self._requeue_due(record):
                unreadable = await self._unreadable(view)
                if unreadable is not None:  # a resume would fail the same way: say so instead
                    alerts += (await self._book.sight(unreadable))[1]
                    continue
                requests.append(
                    ResumeRequested(
                        run_id=view.run_id,
                        reason=f"orphaned: no live lease since {view.updated_at} "
                        f"(last writer {view.worker_id or '?'})",
                        requested_by=self._settings.reconciler_id,
                    )
                )
        if not alerts and not requests:
            return
        await self._log.publish([*requests, *alerts])
        await self._book.confirm(alerts)
        report.orphans += len(requests)
        report.resumes += len(requests)
        report.alerts_opened += len(alerts)
        if requests:
            _log.info("orphan_requeued", run_id=view.run_id, last_writer=view.worker_id)

    async def _unreadable(self, view: RunView) -> AlertCondition | None:
        """The run.unreadable condition if the run's log holds records nobody can decode."""
        try:
            await self._log.read_run(view.run_id)
        except RunLogCorruptError as e:
            where = [
                {"topic": x.topic, "partition": x.partition, "offset": x.offset}
                for x in e.errors[:20]
            ]
            _log.warning("orphan_unreadable", run_id=view.run_id, records=len(e.errors))
            return AlertCondition(
                code=RUN_UNREADABLE.code,
                run_id=view.run_id,
                summary=f"run {view.run_id} cannot be resumed: {e}",
                detail={"undecodable": where, "count": len(e.errors)},
            )
        return None

    async def _requeue_due(self, record: AlertRecord) -> bool:
        grace = self._settings.reconciler_orphan_grace_ms
        now = self._clock()
        return await self._book.store.act_if(
            record.key, now, lambda r: r.acted_at == 0 or now - r.acted_at >= grace
        )
