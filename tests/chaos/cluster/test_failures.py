"""Failures on the cluster stack: a partition leader SIGKILLed, and a worker frozen past its
leases. Every run finishes, every effect happens exactly once, and the views equal the log."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from aiokafka.errors import KafkaError

from agentledger.bus.publisher import KafkaPublisher
from agentledger.demo.agent import expected_effects
from agentledger.events.models import RunEvent
from agentledger.events.topics import topic_names
from agentledger.fleet import FleetSettings, submit_run
from agentledger.fleet.testing import (
    WorkerProcess,
    alerts,
    fleet_settings,
    fold_runs,
    read_topics,
    wait_until,
)
from agentledger.projector.testing import ProjectorProcess, projector_settings
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.views import RunView
from agentledger.views.fold import fold
from agentledger.views.redis_store import RedisViewStore
from tests.chaos.cluster.conftest import ClusterUnderTest
from tests.chaos.test_fleet_chaos import essence, owners, reconciler
from tests.integration.fleet_support import finished

pytestmark = [pytest.mark.chaos, pytest.mark.cluster, pytest.mark.timeout(600)]

RUNS = 20
AGENT = "agentledger.fleet.examples:refund"
THINK_S = 3.0  # each run's model call: long enough to have all 20 in flight at the kill
LEASE_TTL_MS = 3_000


@pytest_asyncio.fixture(loop_scope="session")
async def sandbox(tmp_path: Path) -> AsyncIterator[SandboxProcess]:
    """The external world of this test."""
    async with SandboxProcess(tmp_path / "sandbox.db") as process:
        yield process


def _fleet(settings: CommonSettings, sandbox: SandboxProcess, lease_ttl_ms: int) -> FleetSettings:
    """Fleet settings on the cluster: short leases and sessions, retries for broker failover."""
    return fleet_settings(
        settings,
        provider_url=sandbox.url,
        lease_ttl_ms=lease_ttl_ms,
        kafka_transaction_timeout_ms=5_000,
        fleet_session_timeout_ms=8_000,
        fleet_heartbeat_ms=1_000,
        resume_barrier_s=1.0,
        fleet_run_retries=8,
    )


@contextlib.asynccontextmanager
async def fleet_on_cluster(
    base: CommonSettings, sandbox: SandboxProcess, log_dir: Path, workers: int
) -> AsyncIterator[list[WorkerProcess]]:
    """A projector, a reconciler and ``workers`` worker processes, all on the cluster."""
    common = _fleet(base, sandbox, lease_ttl_ms=LEASE_TTL_MS)
    tag = common.key_prefix
    procs = [
        WorkerProcess(
            common.model_copy(update={"worker_id": f"{tag}-w{i}"}), AGENT, log_dir=log_dir
        )
        for i in range(workers)
    ]
    proj = projector_settings(common, projector_group=f"{tag}-projector")
    async with (
        ProjectorProcess(proj) as projector,
        reconciler(base, sandbox.url),
        contextlib.AsyncExitStack() as stack,
    ):
        await projector.wait_ready()
        for proc in procs:
            await stack.enter_async_context(proc)
        shares = await wait_until(
            lambda: asyncio.sleep(0, [w.assigned() for w in procs]),
            lambda got: all(got) and sum(len(g or ()) for g in got) == common.run_partitions,
            timeout_s=120,
        )
        assert all(shares), f"assignments: {shares}"
        yield procs


async def submit(common: FleetSettings, ids: list[str]) -> None:
    """Request every run (each thinks THINK_S to a few seconds more)."""
    async with KafkaPublisher(common) as publisher:
        for i, run_id in enumerate(ids):
            think = {"seed": i, "think_s": THINK_S + (i % 3)}
            await submit_run(publisher, "refund-demo", think, run_id=run_id)


async def check_outcome(
    common: FleetSettings, sandbox: SandboxProcess, ids: list[str]
) -> dict[str, RunView]:
    """Every run succeeded; 0 duplicate and 0 lost effects; Redis equals the fold of Kafka."""
    views = await wait_until(lambda: fold_runs(common), finished(ids), timeout_s=300)
    assert {r: views[r].status for r in ids} == dict.fromkeys(ids, "succeeded")
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
    # the projector caught up: every Redis view equals the fold of the log
    assert common.redis_url is not None
    async with RedisViewStore.from_url(
        common.redis_url, key_prefix=common.key_prefix, settings=common
    ) as store:

        async def stored() -> dict[str, RunView | None]:
            return {r: await store.load(r) for r in ids}

        got = await wait_until(
            stored,
            lambda got: all(
                got[r] is not None and essence(got[r]) == essence(views[r])  # type: ignore[arg-type]
                for r in ids
            ),
            timeout_s=120,
        )
    for run_id in ids:
        found = got[run_id]
        assert found is not None, run_id
        assert essence(found) == essence(views[run_id]), run_id
    return views


async def run_leaders(cluster: ClusterUnderTest, settings: CommonSettings) -> Counter[int]:
    """How many run-topic partitions each broker (node id) leads now (empty: no answer yet,
    e.g. the metadata still names a node just killed)."""
    admin = cluster.admin()
    try:
        await admin.start()
        described = await admin.describe_topics(list(topic_names(settings).run_topics))
    except (KafkaError, OSError):
        return Counter()
    finally:
        await admin.close()
    return Counter(p["leader"] for t in described for p in t["partitions"] if p["leader"] >= 0)


async def test_runs_survive_a_partition_leader_sigkilled(
    cluster: ClusterUnderTest,
    cluster_settings: CommonSettings,
    sandbox: SandboxProcess,
    tmp_path: Path,
) -> None:
    """SIGKILL of the broker leading the most run-topic partitions while 20 runs are in flight:
    every run finishes, the sandbox counts 0 duplicate and 0 lost effects, and the projector's
    views catch up with the log."""
    common = _fleet(cluster_settings, sandbox, lease_ttl_ms=LEASE_TTL_MS)
    ids = [f"{common.key_prefix}-run{i:02d}" for i in range(RUNS)]
    async with fleet_on_cluster(cluster_settings, sandbox, tmp_path, workers=2):
        await submit(common, ids)
        # in flight: every run has started and none has finished
        started = await wait_until(
            lambda: fold_runs(common),
            lambda views: all(r in views and views[r].cursor >= 1 for r in ids),
            timeout_s=120,
        )
        assert all(r in started for r in ids)
        assert any(started[r].status == "running" for r in ids)
        leaders = await run_leaders(cluster, common)
        node, led = leaders.most_common(1)[0]
        assert led >= 1
        assert await cluster.stack.kill_broker(node)
        after = await wait_until(
            lambda: run_leaders(cluster, common),
            lambda got: node not in got and sum(got.values()) == sum(leaders.values()),
            timeout_s=60,
        )
        assert node not in after, f"node {node} still leads {after}"
        await check_outcome(common, sandbox, ids)


async def test_a_frozen_worker_is_fenced_after_waking(
    cluster: ClusterUnderTest,
    cluster_settings: CommonSettings,
    sandbox: SandboxProcess,
    tmp_path: Path,
) -> None:
    """SIGSTOP a worker past its lease ttl, then SIGCONT it: its runs are taken over and
    finish once, and nothing it writes after waking changes any view (the fold of the log
    without those writes is the same), while an alert names it."""
    common = _fleet(cluster_settings, sandbox, lease_ttl_ms=LEASE_TTL_MS)
    ids = [f"{common.key_prefix}-run{i:02d}" for i in range(RUNS)]
    async with fleet_on_cluster(cluster_settings, sandbox, tmp_path, workers=2) as (
        frozen,
        survivor,
    ):
        await submit(common, ids)
        going = await wait_until(
            lambda: owners(common, ids),
            lambda held: frozen.worker_id in held.values(),
            timeout_s=120,
        )
        frozen.freeze()
        mine = [r for r, owner in going.items() if owner == frozen.worker_id]
        assert mine
        # past its leases: every run it held is finished or carried on by the survivor
        await wait_until(
            lambda: fold_runs(common),
            lambda views: all(
                r in views
                and (views[r].status == "succeeded" or views[r].worker_id != frozen.worker_id)
                for r in mine
            ),
            timeout_s=180,
        )
        topics = list(topic_names(common).run_topics)
        before = await read_topics(common, topics)
        woke_at = {(tp.topic, tp.partition): off for tp, off, _ in before}
        frozen.thaw()
        views = await check_outcome(common, sandbox, ids)
        assert survivor.returncode is None
    # what the woken worker wrote under the fences it lost (past the offsets of the moment it
    # woke) is never applied: the fold without those records is the same
    kept: dict[str, list[RunEvent]] = {}
    late = 0
    for tp, off, event in await read_topics(common, topics):
        if not isinstance(event, RunEvent):
            continue
        woken = off > woke_at.get((tp.topic, tp.partition), -1)
        stale = event.fence < views[event.run_id].fence
        if woken and stale and event.worker_id == frozen.worker_id:
            late += 1
            continue
        kept.setdefault(event.run_id, []).append(event)
    for run_id in ids:
        without = fold(RunView(run_id=run_id), kept[run_id]).view
        assert essence(without) == essence(views[run_id]), (run_id, late)
    named = [a for a in await alerts(common) if a.worker_id == frozen.worker_id]
    assert {a.code for a in named} & {"lease.lost", "fence.stale"}, named
