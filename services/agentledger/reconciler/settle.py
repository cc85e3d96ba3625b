"""Writing an operator's verdict on an effect the way the reconciler writes a finding.

:class:`Settler` takes the run's lease as ``operator:<name>`` (refusing while a live writer
holds it), reads the run's latest view behind the resume barrier, and publishes the plan of
:func:`~agentledger.reconciler.resolve.plan_resolve` fenced, with the closed alert events, in
one transaction. :func:`open_settler` wires it to Kafka and Redis from settings.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial

import structlog

from agentledger._core.loader import fold_log
from agentledger._core.ports import Ports
from agentledger.alerts.book import AlertBook
from agentledger.alerts.intake import take_in_alerts
from agentledger.alerts.redis_store import RedisAlertStore, RedisDeliveryLedger
from agentledger.bus.port import EventLog
from agentledger.errors import LeaseHeldError, RunError
from agentledger.events.models import Alert, EffectReconciled, Event, now_ms
from agentledger.leases import Lease, LeaseStore
from agentledger.reconciler.claim import RunClaimer
from agentledger.reconciler.resolve import Verdict, open_effect, plan_resolve
from agentledger.reconciler.settings import ReconcilerSettings
from agentledger.stack.resolve import resolve_settings
from agentledger.views.model import RunView
from agentledger.views.store import ViewReader

_log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Settled:
    """What was written for one verdict."""

    reconciled: EffectReconciled
    resume_requested: bool
    alerts_closed: list[str]

    def to_dict(self) -> dict[str, object]:
        """The written finding and what followed, as JSON-ready data."""
        return {
            **self.reconciled.model_dump(mode="json"),
            "resume_requested": self.resume_requested,
            "alerts_closed": self.alerts_closed,
        }

    def summary(self) -> str:
        """One line for a person: the finding, the alerts closed, the resume."""
        ev = self.reconciled
        text = f"{ev.effect} ({ev.idempotency_key}) of run {ev.run_id}: {ev.finding}"
        if ev.external_ref:
            text += f" as {ev.external_ref}"
        if self.alerts_closed:
            text += f"; closed alert {', '.join(self.alerts_closed)}"
        if self.resume_requested:
            text += "; resume requested"
        return f"{text} (written as {ev.worker_id})"


def held_error(run_id: str, lease: Lease | None, now: int) -> LeaseHeldError:
    """The refusal while a live writer holds the run: who, for how long, what to do."""
    who = "another writer" if lease is None else repr(lease.owner)
    left = "" if lease is None else f" for another {max(0, lease.expires_at - now) / 1000:.1f}s"
    msg = (
        f"the run's lease is held by {who}{left}: a live worker owns the run and resolves its "
        "own intents; wait until it finishes or its lease expires, then try again"
    )
    return LeaseHeldError(msg, run_id=run_id)


class Settler:
    """Writes operators' verdicts as the holder of the runs' leases."""

    def __init__(
        self,
        *,
        log: EventLog,
        views: ViewReader,
        leases: LeaseStore,
        book: AlertBook,
        ttl_ms: int,
        barrier_s: float,
        clock: Callable[[], int] = now_ms,
        intake: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._intake = intake
        self._log_events = log
        self._views = views
        self._leases = leases
        self._book = book
        self._ttl_ms = ttl_ms
        self._barrier_s = barrier_s
        self._clock = clock

    async def settle(self, run_id: str, effect: str, v: Verdict) -> Settled:
        """Write the verdict on ``effect`` (key or name); RunError/LeaseHeldError if refused."""
        view = await self._known(run_id)
        open_effect(view, effect)  # refuse before taking the lease when the views already tell
        lease = await self._leases.current(run_id)
        if lease is not None and lease.owner != v.writer:
            raise held_error(run_id, lease, self._clock())
        if self._intake is not None:  # a worker's alert on the topic is closed under its own id
            await self._intake()
        claimer = RunClaimer(
            self._log_events,
            self._views,
            self._leases,
            owner=v.writer,
            ttl_ms=self._ttl_ms,
            barrier_s=self._barrier_s,
        )
        try:
            async with claimer.claim(run_id, floor=view.fence) as claim:
                plan = plan_resolve(
                    claim.view, effect, v, fence=claim.lease.fence, now=self._clock()
                )
                closed: list[Alert] = await self._book.close(plan.clear)
                events: list[Event] = [*plan.events, *plan.requests, *closed]
                await self._log_events.publish(events)
                await self._book.confirm(closed)
        except LeaseHeldError:
            raise held_error(run_id, await self._leases.current(run_id), self._clock()) from None
        [reconciled] = [e for e in plan.events if isinstance(e, EffectReconciled)]
        _log.info(
            "effect_resolved_by_operator",
            run_id=run_id,
            effect=reconciled.effect,
            key=reconciled.idempotency_key,
            finding=reconciled.finding,
            by=v.by,
        )
        return Settled(reconciled, bool(plan.requests), [a.alert_id for a in closed])

    async def _known(self, run_id: str) -> RunView:
        """The run's view (from the log if the views lack it); RunError if it has no events."""
        view = await self._views.load(run_id)
        if view is None:
            view = await fold_log(self._log_events, run_id)
        if view.applied_seq == 0:
            msg = "no such run: neither the views nor the log have its events (see: agentledger "
            raise RunError(msg + "effects list)", run_id=run_id)
        return view


@asynccontextmanager
async def open_settler(settings: ReconcilerSettings) -> AsyncIterator[Settler]:
    """A settler on Kafka and Redis (the local stack fills endpoints that are unset)."""
    settings = await resolve_settings(settings)
    async with AsyncExitStack() as stack:
        # Its own transactional id: a reconciler's would fence the running service's producer.
        ports = await stack.enter_async_context(
            Ports(
                settings,
                transactional_id=f"{settings.topic_prefix}effects-resolve-{uuid.uuid4().hex}",
            )
        )
        redis, leases, views, log = ports.redis, ports.leases, ports.store, ports.log
        book = AlertBook(RedisAlertStore(redis, settings.key_prefix), source="cli")
        ledger = RedisDeliveryLedger(redis, settings.key_prefix)
        yield Settler(
            intake=partial(take_in_alerts, settings, book, ledger),
            log=log,
            views=views,
            leases=leases,
            book=book,
            ttl_ms=settings.reconciler_lease_ttl_ms,
            barrier_s=settings.reconciler_barrier_timeout_s,
        )
