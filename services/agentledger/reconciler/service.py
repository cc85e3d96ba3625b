"""The reconciler service: one pass resolves open intents, watches runs, settles alerts.

A pass (``run_once``) asks the open-intent index for intents older than the grace period, and for
each run that no live writer holds: takes the run's lease, reads its latest view, asks each
intent's provider ``lookup(key)``, and writes what it found as the lease holder (EffectReconciled,
RunPaused for UNKNOWN) with the requests and alerts that follow, in one transaction. Then it
watches running and paused runs (orphans, expired pauses, overruns), compensates what failed runs
left performed, closes alerts whose condition cleared, and republishes unconfirmed alert events.
It never performs an effect.

A pass failing because Kafka or Redis is unreachable is retried at the next poll until that
outage, counted from its first failure, has lasted the outage budget
(``AGENTLEDGER_OUTAGE_BUDGET_S``); then :meth:`Reconciler.run` raises the UnreachableError
naming the dependency and the wait (``agentledger reconciler``: one line, exit 2). Nothing is
lost: the intents stay open in the log and the views, for the next reconciler to resolve.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from functools import partial

import structlog

from agentledger import outage
from agentledger.alerts.book import AlertBook
from agentledger.alerts.codes import EFFECT_IDENTITY_MISMATCH
from agentledger.alerts.model import condition_key
from agentledger.bus.port import EventLog
from agentledger.errors import AgentLedgerError, StaleFenceError, UnreachableError
from agentledger.events.models import Alert, Event, RunPaused, now_ms
from agentledger.leases import Lease, LeaseStore
from agentledger.providers.hashing import EffectHasher
from agentledger.reconciler.claim import Claim, RunClaimer
from agentledger.reconciler.compensation import Compensator
from agentledger.reconciler.decide import (
    PLAN_FIELDS,
    Resolution,
    RunPlan,
    decide,
    intent_due,
    plan_run,
)
from agentledger.reconciler.pacing import (
    FIRST_BATCH,
    WRITE_LINGER_S,
    InFlight,
    ViewTurns,
    WriteWaves,
    batch_sizes,
)
from agentledger.reconciler.providers import ProviderPool
from agentledger.reconciler.report import PassReport
from agentledger.reconciler.settings import MAX_REDIS_IN_FLIGHT, ReconcilerSettings
from agentledger.reconciler.watch import RunWatch
from agentledger.tasks import within
from agentledger.views.model import EffectView, RunView
from agentledger.views.store import ViewReader

# The pacing helpers lived here before they had their own module: still importable from here.
__all__ = ["CLAIM_LANES", "FIRST_BATCH", "Reconciler", "WriteWaves", "batch_sizes"]

_log = structlog.get_logger(__name__)
#: Batches taking leases (and reading end offsets) at once by one instance; their waits for the
#: projector and their view reads come at their turns (ViewTurns; claim-ahead, DESIGN.md §19).
CLAIM_LANES = 2
#: Batches' worth of runs whose views may be read ahead of their lookups (see ViewTurns).
VIEWS_AHEAD = 2


@dataclass(frozen=True)
class _Pace:
    """A pass's claim lanes (leases and end offsets) and its turns to read views."""

    lanes: asyncio.Semaphore
    turns: ViewTurns


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
        self.hasher = EffectHasher(settings.hash_key.get_secret_value())
        self._clock = clock
        self.claimer = RunClaimer(
            log,
            views,
            leases,
            owner=self.owner,
            ttl_ms=settings.reconciler_lease_ttl_ms,
            barrier_s=settings.reconciler_barrier_timeout_s,
            io_concurrency=min(settings.reconciler_run_concurrency, MAX_REDIS_IN_FLIGHT),
        )
        self.watch = RunWatch(settings, log=log, views=views, leases=leases, book=book, clock=clock)
        self.compensator = Compensator(self.claimer, providers, book, clock=clock)
        self._alert_keys: set[str] = set()
        self._muted: set[str] = set()
        #: Called with each finished pass's report (the metrics count them).
        self.observers: list[Callable[[PassReport], None]] = []
        #: Outages failed passes or batches counted towards; ended by a pass without errors.
        self._outages: set[outage.Outage] = set()
        #: Set when a batch's outage outlasted the budget; the pass then raises it.
        self._fatal: UnreachableError | None = None
        #: The service's stop event (set by :meth:`run`): once set, no new lookup starts.
        self._stop: asyncio.Event | None = None

    async def run_once(self, *, watch: bool = True) -> PassReport:
        """One full pass (``watch=False``: intents and alerts only, no scan of every run)."""
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
        await self._reconcile(list(dict.fromkeys(i.run_id for i in intents)), report)
        seen = await self.watch.scan(report) if watch else {}
        if watch and self.settings.reconciler_auto_compensate:
            await self.compensator.scan(report, limit=self.settings.reconciler_scan_limit)
        await self.watch.settle(report, seen)
        await self.book.flush(self.log, older_than_ms=self.settings.reconciler_alert_flush_ms)
        counts = report.to_dict()
        # An idle pass every poll would drown the log: say something only when something moved.
        (_log.info if any(counts.values()) else _log.debug)(
            "reconciler_pass", owner=self.owner, **counts
        )
        for observe in self.observers:
            observe(report)
        return report

    async def run(self, stop: asyncio.Event) -> None:
        """Pass after pass until ``stop`` is set; a failed pass is logged and retried next poll,
        except past the outage budget: then the UnreachableError is raised.

        Once ``stop`` is set the pass under way asks no provider anything more: lookups under
        way finish and are written, runs claimed ahead whose lookups had not started are left
        open and their leases released as every claim's are, and the pass ends."""
        self._stop = stop
        watched_at = -math.inf
        while not stop.is_set():
            watch = time.monotonic() - watched_at >= self.settings.reconciler_watch_interval_s
            if watch:
                watched_at = time.monotonic()
            try:
                report = await self.run_once(watch=watch)
            except AgentLedgerError as e:
                fatal = self._gave_up(e)
                if fatal is not None:
                    budget = self.settings.outage_budget_s
                    _log.error("reconciler_gave_up", error=str(fatal), budget_s=budget)
                    if fatal is e:
                        raise
                    raise fatal from e
                _log.error("reconciler_pass_failed", error=str(e), retryable=e.retryable)
            except Exception as e:  # noqa: BLE001 - the service's outermost loop: log, go on
                _log.exception("reconciler_pass_crashed", error=f"{type(e).__name__}: {e}")
            else:
                if not report.errors:
                    self._recovered()
            with suppress(TimeoutError):
                await within(stop.wait(), self.settings.reconciler_poll_interval_s)

    async def _reconcile(self, run_ids: Sequence[str], report: PassReport) -> None:
        """Resolve the due intents of ``run_ids``, in batches claimed together.

        No view is read before the claim: the lease says whether a live writer has the run, and
        the view read behind the barrier says what is due. Batches start in order while their
        runs fit in ``run_concurrency`` runs in flight (claimed and not yet released), but only
        ``CLAIM_LANES`` of them take leases at a time: the first (small, see
        :func:`batch_sizes`) batch's lookups start as soon as its own claim is done, the next
        batches are claimed ahead while they run (their waits for the projector overlap, and
        batches claimed before the pass's first writes do not wait for them at all), and other
        instances claiming the same runs meanwhile get a share.
        """
        batch = self.settings.reconciler_batch_size
        chunks: list[list[str]] = []
        start = 0
        for size in batch_sizes(len(run_ids), batch):
            chunks.append(list(run_ids[start : start + size]))
            start += size
        room = InFlight(max(batch, self.settings.reconciler_run_concurrency))
        pace = _Pace(asyncio.Semaphore(CLAIM_LANES), ViewTurns(low=VIEWS_AHEAD * batch))

        async def one(index: int, chunk: list[str]) -> None:
            try:
                await self._reconcile_batch(index, dict.fromkeys(chunk, 0), report, pace)
            except AgentLedgerError as e:
                report.errors += 1
                self._fatal = self._fatal or self._gave_up(e)
                _log.warning("reconcile_batch_failed", runs=len(chunk), error=str(e))
            finally:
                await pace.turns.finished(index)
                await room.give(len(chunk))

        async with asyncio.TaskGroup() as tg:
            for index, chunk in enumerate(chunks):
                await room.take(len(chunk))
                if self._fatal is not None or (self._stop is not None and self._stop.is_set()):
                    await room.give(len(chunk))
                    break
                tg.create_task(one(index, chunk))
        fatal, self._fatal = self._fatal, None
        if fatal is not None:
            raise fatal

    def _gave_up(self, error: AgentLedgerError) -> UnreachableError | None:
        """Count a failure of an unreachable dependency towards its outage; the error to stop
        with once that outage has lasted the budget (None while it has not, or for others)."""
        counted = outage.spent(error, self.settings.outage_budget_s)
        if counted is None:
            return None
        down, fatal = counted
        self._outages.add(down)
        return fatal

    def _recovered(self) -> None:
        """A pass went through without errors: the outages it was counting are over."""
        for down in self._outages:
            down.recovered()
        self._outages.clear()

    async def _reconcile_batch(
        self, index: int, floors: dict[str, int], report: PassReport, pace: _Pace
    ) -> None:
        """Claim the runs (batch ``index`` of the pass; its views read at its turn), resolve
        their due intents (their lookups concurrent, bounded by each provider's concurrency),
        write each run as its lease holder, release the leases.

        The writes go in waves (:class:`WriteWaves`): the runs resolved within ``WRITE_LINGER_S`` of
        each other publish together, so the log commits them in one transaction instead of one
        per lookup that happens to finish alone."""
        async with AsyncExitStack() as held:
            claims = await held.enter_async_context(
                self.claimer.claim_many(
                    floors,
                    lane=pace.lanes,
                    turn=partial(pace.turns.turn, index),
                    only=PLAN_FIELDS,
                )
            )
            report.held += len(claims.refused)
            waves = WriteWaves(len(claims.held), WRITE_LINGER_S)
            async with asyncio.TaskGroup() as tg:
                for claim in claims.held.values():
                    tg.create_task(self._resolve(claim, report, waves, pace.turns))

    async def _resolve(
        self, claim: Claim, report: PassReport, waves: WriteWaves, turns: ViewTurns
    ) -> None:
        run_id = claim.view.run_id
        waiting = True
        queued = True
        try:
            due = self._due(claim.view, None, report)
            if not due:
                return
            if len(due) == 1:  # the common case: no task of its own for the one lookup
                found = [await self._lookup(due[0], report)]
            else:
                found = list(await asyncio.gather(*(self._lookup(i, report) for i in due)))
            # Lookups skipped because the service is stopping leave their intents open: what
            # was found is written, nothing is guessed for the rest (plan_run asks no resume
            # while an intent stays open).
            resolutions = [r for r in found if r is not None]
            queued = False
            await turns.looked_up()
            if not resolutions:
                return
            plan = plan_run(
                claim.view,
                resolutions,
                fence=claim.lease.fence,
                writer=self.owner,
                now=self._clock(),
            )
            waiting = False
            await waves.ready()
            await self._write(run_id, plan, report)
        except AgentLedgerError as e:
            report.errors += 1
            _log.warning("reconcile_run_failed", run_id=run_id, error=str(e))
        finally:
            if queued:
                await turns.looked_up()
            if waiting:
                waves.done()

    def _due(self, view: RunView, lease: Lease | None, report: PassReport) -> list[EffectView]:
        now = self._clock()
        grace = self.settings.reconciler_intent_grace_ms
        due = []
        for intent in view.open_effects():
            if not intent_due(intent, view, lease, now, grace):
                continue
            if self._muted and (
                condition_key(
                    EFFECT_IDENTITY_MISMATCH.code,
                    run_id=view.run_id,
                    idempotency_key=intent.idempotency_key,
                )
                in self._muted
            ):
                continue
            if not self.providers.available(intent.provider):
                report.backed_off += 1
                continue
            due.append(intent)
        return due

    async def _lookup(self, intent: EffectView, report: PassReport) -> Resolution | None:
        """The finding of one lookup; None when the service is stopping and the lookup had not
        got its turn (the intent stays open for the next pass or instance)."""
        outcome = await self.providers.lookup(
            intent.provider, intent.kind, intent.idempotency_key, unless=self._stop
        )
        if outcome is None:
            report.skipped += 1
            return None
        report.looked_up += 1
        resolution = decide(intent, outcome, self.hasher)
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
