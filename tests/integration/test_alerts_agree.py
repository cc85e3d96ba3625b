"""Issue 17 finding 6 on the real stack: ``alerts list`` and ``alerts tail`` agree about a
worker's effect.unknown alert, and a resume or ``effects resolve`` closes it with a reason."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentledger import Ledger
from agentledger._core.keys import effect_key
from agentledger.errors import EffectUnknownError
from agentledger.providers.faults import FaultRule
from agentledger.providers.http import HttpProvider
from agentledger.worker import RunSpec, Step
from tests.integration.test_reconciler import EFFECT, REQUEST, Env, env, module_settings
from tests.integration.test_reconciler_cli import cli, cli_lines

pytestmark = pytest.mark.integration
__all__ = ["env", "module_settings"]


async def unknown_run(e: Env, run_id: str) -> str:
    """A worker performs the effect, the answer is dropped: it records unknown, pauses and
    publishes its effect.unknown alert (no reconciler runs); the key."""
    key = effect_key(run_id, 0, EFFECT, 0)
    await e.client.set_faults(FaultRule(mode="drop-after-commit", key=key, times=1))

    async def body(step: Step) -> Any:
        return (await step.effect(EFFECT, REQUEST)).external_ref

    async with HttpProvider(e.sandbox.url, name="sandbox") as provider:
        ledger = Ledger(
            log=e.log,
            leases=e.leases,
            providers={"sandbox": provider},
            views=e.views,
            worker_id="w-first",
        )
        with pytest.raises(EffectUnknownError):
            async with ledger.run(RunSpec(run_id=run_id, agent="test", plan=[EFFECT])) as run:
                await run.step(EFFECT, body)
    return key


async def states(e: Env, run_id: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(alert id, state) of the run's alerts: open ones in ``alerts list``, and the last state
    of each in ``alerts tail``."""
    listed = [
        (a["alert_id"], a["state"])
        for a in await cli(e, "alerts", "list", "--json")
        if a["run_id"] == run_id
    ]
    last: dict[str, str] = {}
    for a in await cli_lines(e, "alerts", "tail", "--json"):
        if a["run_id"] == run_id:
            last[a["alert_id"]] = a["state"]
    return listed, [(k, v) for k, v in last.items() if v == "open"]


async def test_list_shows_the_workers_alert_and_a_resume_closes_it_everywhere(env: Env) -> None:
    """The worker's open alert is in both; after the resume settles the effect by lookup the
    run succeeds and neither shows the alert open, the closed event saying why."""
    run_id = "run-agree-resume"
    key = await unknown_run(env, run_id)
    listed, tailed = await states(env, run_id)
    assert listed == tailed == [(f"effect.unknown:{run_id}:{key}", "open")]
    result = await env.resume(run_id)
    assert result["replayed"] is True
    assert (await env.view(run_id)).status == "succeeded"
    assert await states(env, run_id) == ([], [])
    closed = [
        a
        for a in await cli_lines(env, "alerts", "tail", "--json")
        if a["run_id"] == run_id and a["state"] == "closed"
    ]
    assert ["LANDED" in json.loads(a["detail_json"])["closed_because"] for a in closed] == [True]


async def test_effects_resolve_closes_the_workers_alert_everywhere(env: Env) -> None:
    """An operator's verdict on the worker's unknown effect closes its alert in the store and
    on the topic, with the verdict as the reason."""
    run_id = "run-agree-resolve"
    key = await unknown_run(env, run_id)
    await env.view(run_id)
    [performed] = await env.effects(key)
    out = await cli(
        env, "effects", "resolve", run_id, key, "--landed", "--ref", performed.id,
        "--by", "ana", "--json",
    )  # fmt: skip
    assert out["alerts_closed"] == [f"effect.unknown:{run_id}:{key}"]
    assert await states(env, run_id) == ([], [])
