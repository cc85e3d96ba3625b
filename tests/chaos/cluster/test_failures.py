"""Failures on the cluster stack: a partition leader SIGKILLed, and a worker frozen past its
leases. Every run finishes, every effect happens exactly once, and the views equal the log."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka.errors import KafkaError

from agentledger.bus.publisher import KafkaPublisher
from agentledger.events.models import RunEvent
from agentledger.events.topics import topic_names
from agentledger.fleet import FleetSettings, submit_run
from agentledger.fleet.testing import (
    WorkerProcess,
    fleet_settings,
    fold_runs,
    read_topics,
    wait_until,
)
from agentledger.projector.testing import projector_settings
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.views import RunView
from agentledger.views.fold import fold
from tests.chaos.cluster.conftest import ClusterUnderTest
from tests.chaos.fleet_support import (
    AGENT,
    effects_once,
    essence,
    owners,
    running_fleet,
    stored_views,
    taken_over,
    view_store,
    views_equal_the_fold,
    zombie_named,
)
from tests.integration.fleet_support import finished

pytestmark = [pytest.mark.chaos, pytest.mark.cluster, pytest.mark.timeout(600)]

RUNS = 20
THINK_S = 3.0  # each run's model call: long enough to have all 20 in flight at the kill
LEASE_TTL_MS = 3_000


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
    async with running_fleet(proj, base, sandbox, procs, assigned_within_s=120):
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
    await effects_once(sandbox, views, ids)
    # the projector caught up: every Redis view equals the fold of the log
    await views_equal_the_fold(common, views, ids, timeout_s=120)
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
        # in flight: every run has started and some have not finished (seen in the projector's
        # views: folding the log on this TLS cluster took seconds a look, longer than a run)
        async with view_store(common) as store:
            started = await wait_until(
                lambda: stored_views(store, ids),
                lambda views: all((v := views[r]) is not None and v.cursor >= 1 for r in ids),
                timeout_s=120,
            )
        assert all(started[r] is not None for r in ids)
        assert any((v := started[r]) is not None and v.status == "running" for r in ids)
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
        await taken_over(common, frozen, mine, timeout_s=180)
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
    await zombie_named(common, frozen)
