"""The reconciler service's ``/metrics``: effects by outcome, open intents, alerts by code."""

from __future__ import annotations

import asyncio

import pytest

from agentledger.fleet.testing import wait_until
from agentledger.projector.testing import free_port
from agentledger.providers.faults import FaultRule
from agentledger.reconciler.app import open_reconciler, serve
from tests.integration.test_metrics_services import Samples, scrape
from tests.integration.test_reconciler import Env, env, module_settings, reconciler_settings

pytestmark = pytest.mark.integration
__all__ = ["env", "module_settings"]
WAIT_S = 60.0


def value(samples: Samples, name: str, **labels: str) -> float:
    """The value of the sample ``name`` with exactly ``labels`` (0 if absent)."""
    return next((v for got, v in samples.get(name, []) if got == labels), 0.0)


async def test_reconciler_metrics_count_an_unknown_effect(env: Env) -> None:
    """With the provider down, the running service counts an UNKNOWN outcome, shows the intent
    still open and the effect.unknown alert open; its counters only grow."""
    await env.dying_worker("run-metrics", perform=True)
    await env.client.set_faults(FaultRule(mode="down"))
    port = free_port()
    settings = reconciler_settings(
        env.common, env.sandbox.url, "rec-metrics", reconciler_metrics_port=port
    )
    stop = asyncio.Event()
    url = f"http://127.0.0.1:{port}/metrics"
    async with open_reconciler(settings) as app:
        task = asyncio.get_running_loop().create_task(serve(app, stop, relay=False))
        try:
            samples = await wait_until(
                lambda: scrape_when_up(url),
                lambda s: value(s, "agentledger_effects_total", service="reconciler",
                                outcome="unknown") >= 1,
                timeout_s=WAIT_S,
            )  # fmt: skip
        finally:
            stop.set()
            await task
    assert value(samples, "agentledger_reconciler_passes_total") >= 1
    assert value(samples, "agentledger_open_intents") == 1
    assert value(samples, "agentledger_alerts_active", code="effect.unknown", state="open") == 1
    assert value(samples, "agentledger_effects_total", service="reconciler", outcome="landed") == 0


async def scrape_when_up(url: str) -> Samples:
    """The page's samples, or none while the server is not listening yet."""
    try:
        return await scrape(url)
    except OSError:
        return {}
