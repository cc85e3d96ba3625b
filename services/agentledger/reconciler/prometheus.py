"""The reconciler's metrics (prometheus-client, one registry per process) and their page.

Counters add up every pass's :class:`~agentledger.reconciler.report.PassReport`; at each scrape
the gauges are read anew: open intents from the views, open alerts by code from the alert store.
"""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from agentledger.alerts.book import AlertBook
from agentledger.outage import OutageCollector
from agentledger.reconciler.report import PassReport
from agentledger.views.store import ViewReader

_OUTCOMES = ("landed", "not_landed", "unknown")


class ReconcilerMetrics:
    """Counters fed by each pass; gauges refreshed at each scrape."""

    def __init__(self, views: ViewReader, book: AlertBook, *, scan_limit: int) -> None:
        self._views = views
        self._book = book
        self._scan_limit = scan_limit
        self.registry = CollectorRegistry()
        r = self.registry
        r.register(OutageCollector("reconciler"))
        self.passes = Counter("agentledger_reconciler_passes", "passes done", registry=r)
        self.effects = Counter(
            "agentledger_effects", "effect outcomes recorded", ["service", "outcome"], registry=r
        )
        self.commits = Counter(
            "agentledger_commits", "fenced transactions committed", ["service"], registry=r
        )
        self.alerts_raised = Counter(
            "agentledger_reconciler_alerts", "alert events written", ["state"], registry=r
        )
        self.open_intents = Gauge(
            "agentledger_open_intents", "effect intents with no known outcome", registry=r
        )
        self.alerts = Gauge(
            "agentledger_alerts_active", "open and acknowledged alerts", ["code", "state"],
            registry=r,
        )  # fmt: skip
        for outcome in _OUTCOMES:
            self.effects.labels(service="reconciler", outcome=outcome)
        self.commits.labels(service="reconciler")

    def observe(self, report: PassReport) -> None:
        """Add one pass's counts."""
        self.passes.inc()
        for outcome in _OUTCOMES:
            self.effects.labels(service="reconciler", outcome=outcome).inc(getattr(report, outcome))
        written = report.resolved + report.unknown + report.resumes + report.compensated
        self.commits.labels(service="reconciler").inc(written)
        self.alerts_raised.labels(state="open").inc(report.alerts_opened)
        self.alerts_raised.labels(state="closed").inc(report.alerts_closed)

    async def render(self) -> bytes:
        """The page: gauges read now, then every family as Prometheus text."""
        self.open_intents.set(len(await self._views.open_intents(limit=self._scan_limit)))
        self.alerts.clear()
        records = await self._book.active()
        for (code, state), n in Tally((a.code, a.state) for a in records).items():
            self.alerts.labels(code=code, state=state).set(n)
        return generate_latest(self.registry)
