"""The reconciler service: one pass resolves open intents, watches runs, settles alerts.

A pass (``run_once``) asks the open-intent index for intents older than the grace period, and for
each run that no live writer holds: takes the run's lease, reads its latest view, asks each
intent's provider ``lookup(key)``, and writes what it found as the lease holder (EffectReconciled,
RunPaused for UNKNOWN) with the requests and alerts that follow, in one transaction. Then it
watches running and paused runs (orphans, expired pauses, overruns), compensates what failed runs
left performed, closes alerts whose condition cleared, and republishes unconfirmed alert events.
It never performs an effect.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress

import structlog

from agentledger.alerts.book import AlertBook
from agentledger.alerts.codes import EFFECT_IDENTITY_MISMATCH
from agentledger.alerts.model import condition_key
from agentledger.bus.port import EventLog
from agentledger.errors import AgentLedgerError, LeaseHeldError, StaleFenceError
from agentledger.events.models import Alert, Event, RunPaused, now_ms
from agentledger.leases import Lease, LeaseStore
from agentledger.reconciler.claim import RunClaimer
from agentledger.reconciler.compensation import Compensator
from agentledger.reconciler.decide import Resolution, RunPlan, decide, intent_due, plan_run
from agentledger.reconciler.providers import ProviderPool
from agentledger.reconciler.report import PassReport
from agentledger.reconciler.settings import ReconcilerSettings
from agentledger.reconciler.watch import RunWatch
from agentledger.views.model import EffectView, RunView
from agentledger.views.store import ViewReader

_log = structlog.get_logger(__name__)


class Reconciler:
    """Resolves intents without outcome and raises alerts; many instances may run at once."""

    def __init__(
        self,
        settings: ReconcilerSettings,
        *,
        log: EventLog,
        views: ViewReader,
        leases: LeaseStore,
        providers: ProviderPool,
        book: AlertBook,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.settings = settings
        self.owner = settings.reconciler_id
        self.log = log
        self.views = views
        self.leases = leases
        self.providers = providers
        self.book = book
        self._clock = clock
        self.claimer = RunClaimer(
            log,
            views,
            leases,
            owner=self.owner,
            ttl_ms=settings.reconciler_lease_ttl_ms,
            barrier_s=settings.reconciler_barrier_timeout_s,
        )
        self.watch = RunWatch(settings, log=log, views=views, leases=leases, book=book, clock=clock)
        self.compensator = Compensator(self.claimer, providers, book, clock=clock)
        self._alert_keys: set[str] = set()
        self._muted: set[str] = set()

    async def run_once(self) -> PassReport:
        """One full pass; returns what it did."""
        report = PassReport()
        records = await self.book.store.records()
        self._alert_keys = {r.key for r in records}
        self._muted = {
            r.key
            for r in records
            if r.code == EFFECT_IDENTITY_MISMATCH.code and r.state != "closed"
        }
        now = self._clock()
        intents = await self.views.open_intents(
            older_than=now - self.settings.reconciler_intent_grace_ms,
            limit=self.settings.reconciler_scan_limit,
        )
        report.intents = len(intents)
        run_ids = list(dict.fromkeys(i.run_id for i in intents))
        await self._each(run_ids, lambda run_id: self._reconcile_run(run_id, report), report)
        seen = await self.watch.scan(report)
        if self.settings.reconciler_auto_compensate:
            await self.compensator.scan(report, limit=self.settings.reconciler_scan_limit)
        await self.watch.settle(report, seen)
        await self.book.flush(self.log, older_than_ms=self.settings.reconciler_alert_flush_ms)
        _log.info("reconciler_pass", owner=self.owner, **report.to_dict())
        return report

    async def run(self, stop: asyncio.Event) -> None:
        """Pass after pass until ``stop`` is set; a failed pass is logged and retried next poll."""
        while not stop.is_set():
            try:
                await self.run_once()
            except AgentLedgerError as e:
                _log.error("reconciler_pass_failed", error=str(e), retryable=e.retryable)
            with suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.settings.reconciler_poll_interval_s)

    async def _each(
        self,
        run_ids: Sequence[str],
        work: Callable[[str], Awaitable[None]],
        report: PassReport,
    ) -> None:
        """Run ``work`` for every run, ``reconciler_run_concurrency`` at a time."""
        limit = asyncio.Semaphore(self.settings.reconciler_run_concurrency)

        async def one(run_id: str) -> None:
            async with limit:
                try:
                    await work(run_id)
                except AgentLedgerError as e:
                    report.errors += 1
                    _log.warning("reconcile_run_failed", run_id=run_id, error=str(e))

        async with asyncio.TaskGroup() as tg:
            for run_id in run_ids:
                tg.create_task(one(run_id))

    def _due(self, view: RunView, lease: Lease | None, report: PassReport) -> list[EffectView]:
        now = self._clock()
        grace = self.settings.reconciler_intent_grace_ms
        due = []
        for intent in view.open_effects():
            if not intent_due(intent, view, lease, now, grace):
                continue
            mismatch = condition_key(
                EFFECT_IDENTITY_MISMATCH.code,
                run_id=view.run_id,
                idempotency_key=intent.idempotency_key,
            )
            if mismatch in self._muted:
                continue
            if not self.providers.available(intent.provider):
                report.backed_off += 1
                continue
            due.append(intent)
        return due

    async def _reconcile_run(self, run_id: str, report: PassReport) -> None:
        """Resolve the run's due intents as the holder of its lease, or skip it."""
        hint = await self.views.load(run_id)
        if hint is None:
            return
        lease = await self.leases.current(run_id)
        if lease is not None:
            report.held += 1
            return
        if not self._due(hint, None, PassReport()):
            return
        try:
            async with self.claimer.claim(run_id, floor=hint.fence) as claim:
                due = self._due(claim.view, None, report)
                if not due:
                    return
                resolutions = await asyncio.gather(*(self._lookup(i, report) for i in due))
                plan = plan_run(
                    claim.view,
                    resolutions,
                    fence=claim.lease.fence,
                    writer=self.owner,
                    now=self._clock(),
                )
                await self._write(run_id, plan, report)
        except LeaseHeldError:
            report.held += 1

    async def _lookup(self, intent: EffectView, report: PassReport) -> Resolution:
        outcome = await self.providers.lookup(intent.provider, intent.kind, intent.idempotency_key)
        report.looked_up += 1
        resolution = decide(intent, outcome)
        if resolution.finding == "LANDED":
            report.landed += 1
        elif resolution.finding == "NOT_LANDED":
            report.not_landed += 1
        else:
            report.unknown += 1
        return resolution

    async def _write(self, run_id: str, plan: RunPlan, report: PassReport) -> None:
        """Publish the plan's events, requests and alert events in one transaction."""
        opened = await self.book.observe(plan.raise_)
        closed = await self.book.close(
            {k: why for k, why in plan.clear.items() if k in self._alert_keys}
        )
        alerts: list[Alert] = [*opened, *closed]
        events: list[Event] = [*plan.events, *plan.requests, *alerts]
        if not events:
            return
        try:
            await self.log.publish(events)
        except StaleFenceError as e:
            # Our lease moved on mid-pass (a slow provider outlived it): nothing was written.
            _log.warning("reconcile_write_stale", run_id=run_id, error=str(e))
            report.errors += 1
            return
        await self.book.confirm(alerts)
        report.resumes += len(plan.requests)
        report.pauses += sum(1 for e in plan.events if isinstance(e, RunPaused))
        report.alerts_opened += len(opened)
        report.alerts_closed += len(closed)
