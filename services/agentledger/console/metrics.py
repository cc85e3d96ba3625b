"""The console's Prometheus metrics: its requests and actions, and what the views hold now."""

from __future__ import annotations

from collections import Counter as Tally

from prometheus_client import CollectorRegistry, Counter, Gauge

from agentledger.alerts.model import AlertRecord


class ConsoleMetrics:
    """Counters of requests and actions; gauges refreshed from the views at each scrape."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "agentledger_console_requests", "HTTP requests served", ["route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.actions = Counter(
            "agentledger_console_actions", "changes of state asked for", ["action", "outcome"],
            registry=self.registry,
        )  # fmt: skip
        self.open_intents = Gauge(
            "agentledger_open_intents", "effect intents with no known outcome",
            registry=self.registry,
        )  # fmt: skip
        self.alerts = Gauge(
            "agentledger_alerts_active", "open and acknowledged alerts", ["code", "state"],
            registry=self.registry,
        )  # fmt: skip
        self.runs = Gauge(
            "agentledger_runs", "runs in the views", ["status"], registry=self.registry
        )

    def observe_views(
        self, *, open_intents: int, alerts: list[AlertRecord], runs: dict[str, int]
    ) -> None:
        """Set the gauges to what the views and the alert store hold now."""
        self.open_intents.set(open_intents)
        self.alerts.clear()
        for (code, state), n in Tally((a.code, a.state) for a in alerts).items():
            self.alerts.labels(code=code, state=state).set(n)
        for status, n in runs.items():
            self.runs.labels(status=status).set(n)
