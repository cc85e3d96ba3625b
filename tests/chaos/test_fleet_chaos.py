"""Chaos on a fleet of three worker processes: one SIGKILLed mid-flight, one frozen past its
leases (SIGSTOP) and thawed. Every run finishes, every effect happens once, no view keeps a
zombie's write, and an alert names the zombie."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agentledger.bus.publisher import KafkaPublisher
from agentledger.demo.agent import expected_effects
from agentledger.fleet import FleetSettings, submit_run
from agentledger.fleet.testing import (
    WorkerProcess,
    alerts,
    fleet_settings,
    fold_runs,
    run_events,
    wait_until,
)
from agentledger.leasing import RedisLeaseStore
from agentledger.projector.testing import ProjectorProcess, projector_settings
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.reconciler.app import open_reconciler, serve
from agentledger.reconciler.settings import ProviderPolicy, ReconcilerSettings
from agentledger.settings import ArgumentsOnly, CommonSettings
from agentledger.views import RunView
from agentledger.views.redis_store import RedisViewStore
from tests.integration.fleet_support import finished

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

RUNS = 50
LEASE_TTL_MS = 2_500
AGENT = "agentledger.fleet.examples:refund"
THINK_S = 5.0  # the model call of each run: long enough to catch runs mid-flight


class _Reconciler(ArgumentsOnly, ReconcilerSettings):
    """ReconcilerSettings from explicit values only."""


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox(tmp_path: Path) -> AsyncIterator[SandboxProcess]:
    """The external world of this test."""
    async with SandboxProcess(tmp_path / "sandbox.db") as process:
        yield process


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


async def test_three_workers_one_killed_one_frozen(
    ledger_settings: CommonSettings, sandbox: SandboxProcess, tmp_path: Path
) -> None:
    """50 runs on three worker processes survive a SIGKILL of one worker mid-flight and a
    SIGSTOP of another past its leases: all finish, each logical effect is performed once,
    the Redis views equal the fold of Kafka (no stale-fence write applied), and an alert names
    the frozen worker."""
    tag = ledger_settings.key_prefix
    common = fleet_settings(
        ledger_settings,
        provider_url=sandbox.url,
        lease_ttl_ms=LEASE_TTL_MS,
        kafka_transaction_timeout_ms=3_000,
        fleet_session_timeout_ms=6_000,
        fleet_heartbeat_ms=1_000,
        resume_barrier_s=1.0,
        fleet_run_retries=5,
    )
    workers = [
        WorkerProcess(
            common.model_copy(update={"worker_id": f"{tag}-w{i}"}),
            AGENT,
            log_dir=tmp_path,
            concurrency=24,
        )
        for i in range(3)
    ]
    ids = [f"{tag}-run{i:02d}" for i in range(RUNS)]
    proj = projector_settings(ledger_settings, projector_group=f"{tag}-projector")
    async with (
        ProjectorProcess(proj) as projector,
        reconciler(ledger_settings, sandbox.url),
        contextlib.AsyncExitStack() as stack,
    ):
        await projector.wait_ready()
        for worker in workers:
            await stack.enter_async_context(worker)
        # the group is settled: each worker owns some of the requests partitions
        shares = await wait_until(
            lambda: asyncio.sleep(0, [w.assigned() for w in workers]),
            lambda got: all(got) and sum(len(g or ()) for g in got) == common.run_partitions,
            timeout_s=60,
        )
        assert all(shares), f"assignments: {shares}"
        async with KafkaPublisher(common) as publisher:
            for i, run_id in enumerate(ids):
                think = {"seed": i, "think_s": THINK_S + (i % 4)}
                await submit_run(publisher, "refund-demo", think, run_id=run_id)
        killed, frozen, survivor = workers

        # mid-flight: every worker holds runs that have checkpointed a step
        async def progressed() -> dict[str, str]:
            held, views = await owners(common, ids), await fold_runs(common)
            return {r: o for r, o in held.items() if r in views and views[r].cursor >= 1}

        going = await wait_until(
            progressed,
            lambda o: {w.worker_id for w in workers} <= set(o.values()),
            timeout_s=90,
        )
        assert {w.worker_id for w in workers} <= set(going.values()), f"owners: {going}"
        held = await owners(common, ids)
        killed.kill()
        frozen.freeze()
        frozen_runs = [r for r, owner in held.items() if owner == frozen.worker_id]
        # past its leases: every run it held is finished or held by somebody else
        taken = await wait_until(
            lambda: fold_runs(common),
            lambda views: all(
                r in views
                and (views[r].status == "succeeded" or views[r].worker_id != frozen.worker_id)
                for r in frozen_runs
            ),
            timeout_s=120,
        )
        assert all(taken[r].worker_id != frozen.worker_id or taken[r].status == "succeeded"
                   for r in frozen_runs)  # fmt: skip
        frozen.thaw()
        views = await wait_until(lambda: fold_runs(common), finished(ids), timeout_s=240)
        assert {r: views[r].status for r in ids} == dict.fromkeys(ids, "succeeded")
        assert survivor.returncode is None
        # the projector has folded everything it will: Redis equals the fold of Kafka
        assert common.redis_url is not None
        async with RedisViewStore.from_url(common.redis_url, key_prefix=tag) as store:

            async def stored() -> dict[str, RunView | None]:
                return {r: await store.load(r) for r in ids}

            redis_views = await wait_until(
                stored,
                lambda got: all(
                    got[r] is not None and essence(got[r]) == essence(views[r])  # type: ignore[arg-type]
                    for r in ids
                ),
                timeout_s=90,
            )
    for run_id in ids:
        found = redis_views[run_id]
        assert found is not None
        assert essence(found) == essence(views[run_id]), run_id
    # every logical effect exactly once at the provider
    async with SandboxClient(sandbox.url) as client:
        performed = await client.effects()
    per_key = Counter(e.idempotency_key for e in performed)
    per_logical = Counter((e.kind, str(e.payload.get("order_id"))) for e in performed)
    assert max(per_key.values()) == 1
    assert max(per_logical.values()) == 1
    for i, run_id in enumerate(ids):
        kinds = sorted(e.kind for e in views[run_id].effects.values())
        assert kinds == sorted(expected_effects(i, run_id)), run_id
        assert all(per_key[k] == 1 for k in views[run_id].effects), run_id
    assert sum(per_key.values()) == sum(len(views[r].effects) for r in ids)
    # the zombie is named, and nothing it wrote after losing its leases counts
    named = [a for a in await alerts(common) if a.worker_id == frozen.worker_id]
    assert {a.code for a in named} & {"lease.lost", "fence.stale"}, named
    # the killed worker's runs were handed off and finished elsewhere
    events = await run_events(common)
    orphans = [r for r, owner in going.items() if owner == killed.worker_id]
    handed = [r for r in orphans if views[r].worker_id != killed.worker_id]
    assert handed, f"none of {orphans} was finished by another worker"
    assert all(any(e.worker_id == killed.worker_id for e in events[r]) for r in handed)
