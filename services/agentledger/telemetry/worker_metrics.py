"""A worker's Prometheus metrics (one registry per worker process, never the global one)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from agentledger.outage import OutageCollector

#: Step latency buckets, seconds: from a cached replay to a long model call.
_STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)


class WorkerMetrics:
    """Steps, commits, effects, open intents and runs of the runs this worker opens."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        r.register(OutageCollector("worker"))
        self.step_seconds = Histogram(
            "agentledger_step_seconds", "time one step took, by outcome", ["outcome"],
            buckets=_STEP_BUCKETS, registry=r,
        )  # fmt: skip
        self.commits = Counter(
            "agentledger_commits", "run transactions committed", ["service"], registry=r
        )
        self.effects = Counter(
            "agentledger_effects", "effect outcomes", ["service", "outcome"], registry=r
        )
        self.open_intents = Gauge(
            "agentledger_open_intents", "effects sent whose outcome is not recorded yet",
            registry=r,
        )  # fmt: skip
        self.runs = Counter("agentledger_runs_opened", "runs opened", ["mode"], registry=r)
        self.commits.labels(service="worker")

    def committed(self) -> None:
        """One transaction of a run committed."""
        self.commits.labels(service="worker").inc()

    def effect(self, outcome: str) -> None:
        """One effect ended with ``outcome`` (succeeded, replayed, unknown, failed …)."""
        self.effects.labels(service="worker", outcome=outcome).inc()

    def render(self) -> bytes:
        """Every family as Prometheus text."""
        return generate_latest(self.registry)
