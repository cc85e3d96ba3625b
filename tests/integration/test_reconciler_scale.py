"""Two reconciler instances on 500 open intents: each intent looked up exactly once."""

from __future__ import annotations

import asyncio

import pytest

from agentledger._core.keys import effect_key
from agentledger.events.models import Event, RunStarted, StepStarted
from agentledger.providers.http import HttpProvider
from agentledger.reconciler.app import open_reconciler
from tests.integration.test_reconciler import (
    EFFECT,
    REQUEST,
    Env,
    env,
    eventually,
    intent,
    module_settings,
)

pytestmark = pytest.mark.integration
__all__ = ["env", "module_settings"]

RUNS = 500


async def open_intents(e: Env, runs: int) -> list[str]:
    """``runs`` runs whose writers left one intent each; every other one was performed."""
    keys = []
    events: list[Event] = []
    for n in range(runs):
        run_id = f"run-{n:04d}"
        lease = await e.leases.acquire(run_id, "w-gone", 60_000)
        key = effect_key(run_id, 0, EFFECT, 0)
        keys.append(key)
        env_ = {"run_id": run_id, "fence": lease.fence, "worker_id": "w-gone"}
        events += [
            RunStarted(**env_, seq=1, agent="test", plan=[EFFECT]),
            StepStarted(**env_, seq=2, step=0, step_name=EFFECT, attempt=1),
            intent(run_id, key, seq=3, fence=lease.fence, worker="w-gone"),
        ]
    await e.log.publish(events)
    async with HttpProvider(e.sandbox.url, name="sandbox") as provider:
        sem = asyncio.Semaphore(16)

        async def perform(key: str) -> None:
            async with sem:
                await provider.perform(REQUEST, key)

        await asyncio.gather(*(perform(k) for k in keys[::2]))
    for n in range(runs):
        lease = await e.leases.current(f"run-{n:04d}")
        assert lease is not None
        await e.leases.release(lease)

    async def indexed() -> bool:
        return len(await e.views.open_intents(limit=runs * 2)) == runs

    await eventually(indexed, f"{runs} open intents in the index", 120)
    return keys


async def test_two_instances_look_each_intent_up_exactly_once(env: Env) -> None:
    """Two reconcilers in parallel over 500 open intents: the sandbox answers one lookup per key."""
    keys = await open_intents(env, RUNS)
    async with (
        open_reconciler(env.settings("rec-a")) as a,
        open_reconciler(env.settings("rec-b")) as b,
    ):
        reports = await asyncio.gather(a.reconciler.run_once(), b.reconciler.run_once())
        assert sum(r.looked_up for r in reports) == RUNS
        assert all(r.looked_up > 0 for r in reports), "both instances took a share"
        again = await asyncio.gather(a.reconciler.run_once(), b.reconciler.run_once())
        assert sum(r.looked_up for r in again) == 0
    lookups = await env.client.lookups()
    assert sorted(lookups) == sorted(keys)
    assert set(lookups.values()) == {1}
    assert sum(r.landed for r in reports) == RUNS // 2
    assert sum(r.not_landed for r in reports) == RUNS // 2
    assert len(await env.client.effects()) == RUNS // 2
