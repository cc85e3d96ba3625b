"""``/metrics`` of each long-running service is Prometheus text with the figures operators
graph: commits, lag per partition, rebuild progress, open intents, alerts by code."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agentledger.bus.publisher import KafkaPublisher
from agentledger.console.server import running_console
from agentledger.console.testing import console_settings, reconciler_settings
from agentledger.fleet import FleetSettings, submit_run
from agentledger.fleet.examples import refund
from agentledger.fleet.testing import running_worker, wait_until
from agentledger.projector.testing import ProjectorProcess, projector_settings
from agentledger.settings import CommonSettings
from agentledger.views import RunView
from agentledger.views.redis_store import RedisViewStore

pytestmark = pytest.mark.integration
WAIT_S = 90.0
Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse(text: str) -> Samples:
    """Every sample of a Prometheus text page, by sample name."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found.setdefault(s.name, []).append((dict(s.labels), s.value))
    return found


async def scrape(url: str) -> Samples:
    """GET ``url`` as a scraper does; its samples (the content type must be Prometheus')."""
    async with aiohttp.ClientSession() as http, http.get(url) as r:
        assert r.status == 200
        assert r.content_type == "text/plain"
        return parse(await r.text())


@pytest.fixture
def fleet_overrides() -> dict[str, Any]:
    """These runs resume from the projector's views."""
    return {"use_views": True, "resume_barrier_s": 2.0}


async def test_worker_projector_and_console_metrics(
    ledger_settings: CommonSettings, fleet: FleetSettings
) -> None:
    """After two runs: the worker shows its step latency histogram, commits and effects by
    outcome; the projector commits, events applied, lag for every run partition and rebuild
    progress; the console runs by status and open intents."""
    runs = [f"{fleet.key_prefix}-m{i}" for i in range(2)]
    proj = projector_settings(ledger_settings, projector_group=f"{fleet.key_prefix}-projector")
    assert fleet.redis_url is not None
    async with (
        ProjectorProcess(proj) as projector,
        RedisViewStore.from_url(fleet.redis_url, key_prefix=fleet.key_prefix) as views,
        running_worker(fleet.model_copy(update={"fleet_metrics_port": 0}), refund(fleet)) as w,
        running_console(console_settings(fleet), reconciler_settings(fleet)) as console,
    ):
        await projector.wait_ready()
        async with KafkaPublisher(fleet) as publisher:
            for run_id in runs:
                await submit_run(publisher, "refund-demo", {"seed": 1}, run_id=run_id)

        async def done() -> list[str]:
            found = [await views.load(r) for r in runs]
            return [v.status for v in found if isinstance(v, RunView)]

        assert (
            await wait_until(done, lambda s: s == ["succeeded"] * 2, timeout_s=WAIT_S)
            == ["succeeded"] * 2
        )
        p = await wait_until(
            lambda: scrape(f"{projector.url}/metrics"),
            lambda m: all(v == 0 for _, v in m.get("agentledger_projector_lag", [({}, 1)])),
            timeout_s=WAIT_S,
        )
        c = await scrape(f"{console}/metrics")
        assert w.metrics_url is not None
        worker = await scrape(w.metrics_url)

    assert p["agentledger_commits_total"][0][0] == {"service": "projector"}
    assert p["agentledger_commits_total"][0][1] > 0
    assert p["agentledger_projector_events_applied_total"][0][1] > 0
    lag = {(labels["topic"], labels["partition"]) for labels, _ in p["agentledger_projector_lag"]}
    assert len(lag) == 3 * fleet.run_partitions  # steps, effects, acceptance: every partition
    assert p["agentledger_projector_rebuild_progress"][0][1] == 1.0
    steps = {x["outcome"]: v for x, v in worker["agentledger_step_seconds_count"]}
    assert steps == {"checkpointed": 10}  # five steps of each run
    assert {(x["le"], v) for x, v in worker["agentledger_step_seconds_bucket"]} >= {("+Inf", 10)}
    effects = {x["outcome"]: v for x, v in worker["agentledger_effects_total"]}
    assert effects["succeeded"] >= 4
    assert worker["agentledger_commits_total"][0][1] >= 10
    assert worker["agentledger_open_intents"][0][1] == 0
    by_status = {labels["status"]: v for labels, v in c["agentledger_runs"]}
    assert by_status["succeeded"] == 2
    assert c["agentledger_open_intents"][0][1] == 0
