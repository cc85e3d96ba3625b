"""The projector's metrics in Prometheus' format, through prometheus-client.

:class:`ProjectorCollector` reads the service's :class:`~agentledger.projector.metrics.Metrics`
at each scrape (one registry per process, never the global default), so the counters the
applier and runner keep and the bench reads as JSON are the same numbers Prometheus gets.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from agentledger.outage import OutageCollector
from agentledger.projector.metrics import Metrics
from agentledger.projector.runtime import ProjectorRuntime
from agentledger.telemetry.prom import PROMETHEUS_TEXT

_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("records", "agentledger_projector_records_read", "records read from the run topics"),
    ("applied", "agentledger_projector_events_applied", "events folded into the views"),
    ("duplicates", "agentledger_projector_duplicates_skipped", "events already applied"),
    ("parked", "agentledger_projector_events_parked", "events parked ahead of a gap"),
    ("held", "agentledger_projector_events_held", "events held in memory for a gap to fill"),
    (
        "rereads",
        "agentledger_projector_parked_overflow_rereads",
        "runs re-read from the log after parked events over the cap were dropped",
    ),
    ("stale", "agentledger_projector_stale_rejected", "events of a stale fence rejected"),
    ("conflicts", "agentledger_projector_fence_conflicts", "two writers on one fence"),
    ("dead_lettered", "agentledger_projector_dead_lettered", "records sent to the dead letter"),
    ("write_conflicts", "agentledger_projector_write_conflicts", "view writes that lost a race"),
    ("catch_ups", "agentledger_projector_catch_ups", "ranges applied straight from the log"),
    ("retries", "agentledger_projector_retries", "batches retried after an error"),
)


class ProjectorCollector(Collector):
    """Exports one :class:`Metrics` as Prometheus families."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        """Every figure of the projector, read now."""
        m = self._metrics
        for attr, name, doc in _COUNTERS:
            yield CounterMetricFamily(name, doc, value=getattr(m, attr))
        commits = CounterMetricFamily(
            "agentledger_commits", "view writes committed with their offsets", labels=["service"]
        )
        commits.add_metric(["projector"], m.batches)
        yield commits
        alerts = CounterMetricFamily("agentledger_alerts_raised", "alerts raised", labels=["code"])
        for code, n in sorted(m.alerts_by_code.items()):
            alerts.add_metric([code], n)
        yield alerts
        lag = GaugeMetricFamily(
            "agentledger_projector_lag", "records behind the log end", labels=["topic", "partition"]
        )
        for (topic, partition), n in sorted(m.lag.items()):
            lag.add_metric([topic, str(partition)], n)
        yield lag
        yield GaugeMetricFamily(
            "agentledger_projector_assigned_partitions", "run partitions this projector owns",
            value=len(m.assigned),
        )  # fmt: skip
        yield GaugeMetricFamily(
            "agentledger_projector_rebuild_records", "records of catch-ups and rebuilds to apply",
            value=m.rebuild_target,
        )  # fmt: skip
        yield GaugeMetricFamily(
            "agentledger_projector_rebuild_progress",
            "share of the records of catch-ups and rebuilds applied so far (1 = none pending)",
            value=m.rebuild_progress(),
        )


def projector_registry(metrics: Metrics) -> CollectorRegistry:
    """A registry of this process with the projector's collector."""
    registry = CollectorRegistry()
    registry.register(ProjectorCollector(metrics))
    registry.register(OutageCollector("projector"))
    return registry


def metrics_view(runtime: ProjectorRuntime) -> Callable[[Any, Any], Awaitable[Any]]:
    """The faust page of ``/metrics``: Prometheus text for scrapers and curl, the JSON counters
    for ``Accept: application/json`` (the bench and the tests read those)."""
    registry = projector_registry(runtime.metrics)

    async def page(view: Any, request: Any) -> Any:
        if "application/json" in request.headers.get("Accept", ""):
            body = runtime.metrics.as_dict()
            body["parked_runs"] = await runtime.parked_runs()
            return view.json(body)
        return view.bytes(generate_latest(registry), content_type=PROMETHEUS_TEXT)

    return page
