"""Shared by the fleet chaos tests (single node and cluster): a reconciler in this process, a
running fleet, lease owners, and the checks every such test ends with."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from typing import Any

from agentledger.demo.agent import expected_effects
from agentledger.fleet import FleetSettings
from agentledger.fleet.testing import WorkerProcess, alerts, fold_runs, wait_until
from agentledger.leasing import RedisLeaseStore
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.testing import ProjectorProcess
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.reconciler.app import open_reconciler, serve
from agentledger.reconciler.settings import ProviderPolicy, ReconcilerSettings
from agentledger.settings import ArgumentsOnly, CommonSettings
from agentledger.views import RunView
from agentledger.views.redis_store import RedisViewStore

AGENT = "agentledger.fleet.examples:refund"


class _Reconciler(ArgumentsOnly, ReconcilerSettings):
    """ReconcilerSettings from explicit values only."""


@contextlib.asynccontextmanager
async def reconciler(common: CommonSettings, provider_url: str) -> AsyncIterator[None]:
    """A reconciler service in this process: re-queues orphans, resolves open intents."""
    settings = _Reconciler(
        **common.model_dump(),
        provider_url=provider_url,
        reconciler_id=f"rec-{uuid.uuid4().hex[:6]}",
        reconciler_intent_grace_ms=2_000,
        reconciler_orphan_grace_ms=3_000,
        reconciler_poll_interval_s=0.5,
        reconciler_watch_interval_s=1.0,
        reconciler_barrier_timeout_s=5.0,
        reconciler_lease_ttl_ms=30_000,
        reconciler_default_provider=ProviderPolicy(
            attempts=2, timeout_s=5.0, backoff_base_ms=50, backoff_max_ms=500
        ),
        alerts_log=False,
    )
    stop = asyncio.Event()
    async with open_reconciler(settings) as app:
        task = asyncio.get_running_loop().create_task(serve(app, stop, relay=False))
        try:
            yield
        finally:
            stop.set()
            await task


@contextlib.asynccontextmanager
async def running_fleet(
    projector: ProjectorSettings,
    base: CommonSettings,
    sandbox: SandboxProcess,
    workers: Sequence[WorkerProcess],
    *,
    assigned_within_s: float,
) -> AsyncIterator[None]:
    """A projector process, a reconciler on ``base`` and ``workers``, yielded once the group
    has settled: each worker owns some of the requests partitions."""
    async with (
        ProjectorProcess(projector) as process,
        reconciler(base, sandbox.url),
        contextlib.AsyncExitStack() as stack,
    ):
        await process.wait_ready()
        for worker in workers:
            await stack.enter_async_context(worker)
        shares = await wait_until(
            lambda: asyncio.sleep(0, [w.assigned() for w in workers]),
            lambda got: all(got) and sum(len(g or ()) for g in got) == base.run_partitions,
            timeout_s=assigned_within_s,
        )
        assert all(shares), f"assignments: {shares}"
        yield


async def owners(settings: FleetSettings, run_ids: list[str]) -> dict[str, str]:
    """Who holds each run's lease now (runs without a live lease are absent)."""
    async with RedisLeaseStore.from_settings(settings) as leases:
        held = {r: await leases.current(r) for r in run_ids}
    return {r: lease.owner for r, lease in held.items() if lease is not None}


def essence(view: RunView) -> dict[str, Any]:
    """What a view must agree on with the fold of the log."""
    return {
        "status": view.status,
        "applied_seq": view.applied_seq,
        "fence": view.fence,
        "fence_since_seq": view.fence_since_seq,
        "worker_id": view.worker_id,
        "cursor": view.cursor,
        "steps": {i: (s.status, s.attempt, s.result_json) for i, s in view.steps.items()},
        "effects": {k: (e.state, e.external_ref) for k, e in view.effects.items()},
    }


async def taken_over(
    common: FleetSettings, frozen: WorkerProcess, runs: list[str], *, timeout_s: float
) -> dict[str, RunView]:
    """The fold once every run of ``runs`` (held by ``frozen``) is finished or carried on by
    another worker."""
    return await wait_until(
        lambda: fold_runs(common),
        lambda views: all(
            r in views
            and (views[r].status == "succeeded" or views[r].worker_id != frozen.worker_id)
            for r in runs
        ),
        timeout_s=timeout_s,
    )


@contextlib.asynccontextmanager
async def view_store(common: FleetSettings) -> AsyncIterator[RedisViewStore]:
    """The projector's view store of the fleet's namespace, one connection for many looks."""
    assert common.redis_url is not None
    async with RedisViewStore.from_url(
        common.redis_url, key_prefix=common.key_prefix, settings=common
    ) as store:
        yield store


async def stored_views(store: RedisViewStore, ids: list[str]) -> dict[str, RunView | None]:
    """The projector's Redis view of each of ``ids`` now (None: not there yet): milliseconds
    behind the log, where folding the log itself takes seconds on a TLS cluster."""
    return {r: await store.load(r) for r in ids}


async def views_equal_the_fold(
    common: FleetSettings, views: dict[str, RunView], ids: list[str], *, timeout_s: float
) -> None:
    """Once the projector caught up, every Redis view of ``ids`` equals the fold of the log."""
    async with view_store(common) as store:
        got = await wait_until(
            lambda: stored_views(store, ids),
            lambda got: all(
                got[r] is not None and essence(got[r]) == essence(views[r])  # type: ignore[arg-type]
                for r in ids
            ),
            timeout_s=timeout_s,
        )
    for run_id in ids:
        found = got[run_id]
        assert found is not None, run_id
        assert essence(found) == essence(views[run_id]), run_id


async def effects_once(sandbox: SandboxProcess, views: dict[str, RunView], ids: list[str]) -> None:
    """The sandbox performed each logical effect of every run exactly once: 0 duplicate, 0 lost."""
    async with SandboxClient(sandbox.url) as client:
        performed = await client.effects()
    per_key = Counter(e.idempotency_key for e in performed)
    per_logical = Counter((e.kind, str(e.payload.get("order_id"))) for e in performed)
    assert max(per_key.values()) == 1, "a duplicate effect"
    assert max(per_logical.values()) == 1, "a logical effect performed twice"
    for i, run_id in enumerate(ids):
        kinds = sorted(e.kind for e in views[run_id].effects.values())
        assert kinds == sorted(expected_effects(i, run_id)), run_id
        assert all(per_key[k] == 1 for k in views[run_id].effects), f"lost effect in {run_id}"
    assert sum(per_key.values()) == sum(len(views[r].effects) for r in ids)


async def zombie_named(common: FleetSettings, zombie: WorkerProcess) -> None:
    """An alert names the worker that wrote after losing its leases."""
    named = [a for a in await alerts(common) if a.worker_id == zombie.worker_id]
    assert {a.code for a in named} & {"lease.lost", "fence.stale"}, named
