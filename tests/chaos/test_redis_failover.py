"""SIGKILL a Redis Cluster primary while runs are in flight (issue 14, failure 2).

Kafka is the session's broker; Redis is a 3+3 Redis Cluster with TLS and an ACL user. Runs of
the refund agent are in flight in one worker, a projector process keeps the views, and a primary
is SIGKILLed mid-run. Its replica takes over. Runs whose worker lost Redis in the failover are
resumed by a new worker, as after a crash. Afterwards: every run succeeded, each run's committed
events carry non-decreasing fences in seq order with one event per seq (never two live
writers), no fence conflict nor divergent seq was found by the projector, and the live views
equal a replay of the log (`views verify`).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from agentledger._core.loader import fold_log
from agentledger._core.ports import WorkerPorts
from agentledger.demo.agent import refund_agent, spec_for
from agentledger.events.codec import EventCodec
from agentledger.events.models import Alert, Event, RunEvent
from agentledger.events.topics import topic_names
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.testing import ProjectorProcess, projector_settings, settings_env, until
from agentledger.providers.memory import MemoryProvider
from agentledger.settings import ArgumentsOnly, CommonSettings
from agentledger.stack.certs import ensure_certificates
from agentledger.stack.redis_cluster import (
    ClusterState,
    cluster_ok,
    kill_node,
    restart_node,
    roles,
    start_cluster,
    stop_cluster,
    tls_of,
)
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Ledger, WorkerSettings
from tests.conftest import SESSION_STATE_DIR

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(420)]

ROOT = SESSION_STATE_DIR / "redis-failover-tests"
RUNS = 12
THINK_S = 0.4
FORBIDDEN = {"fence.conflict", "run.seq_divergent"}


class FailoverWorkerSettings(ArgumentsOnly, WorkerSettings):
    """Worker settings from arguments only."""


@pytest_asyncio.fixture(loop_scope="session")
async def redis_cluster() -> AsyncIterator[ClusterState]:
    """A fresh TLS Redis Cluster for the test, stopped afterwards."""
    await stop_cluster(ROOT)
    state = await start_cluster(ROOT, tls=tls_of(ensure_certificates(ROOT / "certs")))
    yield state
    await stop_cluster(ROOT)


def worker(base: CommonSettings) -> WorkerSettings:
    """A worker process's settings (own transactional id, a short lease)."""
    return FailoverWorkerSettings(
        **base.model_dump(),
        transactional_id=f"fo-{uuid.uuid4().hex[:8]}",
        lease_ttl_ms=3_000,
        lease_wait_s=30.0,
        resume_barrier_s=0.0,
    )


async def run_all(
    settings: WorkerSettings, runs: list[str], started: asyncio.Event
) -> dict[str, str]:
    """Run (or resume) every run in one worker; the runs that did not finish, with why."""
    provider = MemoryProvider(name="sandbox")
    failed: dict[str, str] = {}
    try:
        async with WorkerPorts(settings) as ports:
            ledger = Ledger.from_settings(
                settings, log=ports.log, leases=ports.leases, providers={"sandbox": provider}
            )

            async def one(run_id: str) -> None:
                try:
                    async with ledger.run(spec_for(run_id, 7)) as run:
                        started.set()
                        await refund_agent(run, 7, think_s=THINK_S)
                except Exception as e:  # noqa: BLE001 - the failover may break any run
                    failed[run_id] = f"{type(e).__name__}: {e}"

            await asyncio.gather(*(one(r) for r in runs))
    except Exception as e:  # noqa: BLE001 - closing the worker may fail too (Redis was lost)
        failed.update(dict.fromkeys(runs, f"worker: {type(e).__name__}: {e}"))
    return failed


async def verify_views(settings: CommonSettings) -> tuple[int, str]:
    """``agentledger views verify``: replay the log into a scratch namespace, compare."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(settings_env(projector_settings(settings)))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", "views", "verify",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def log_events(settings: CommonSettings, topics: list[str]) -> list[Event]:
    """Every committed event of ``topics``, read up to their end offsets."""
    codec = EventCodec()
    found: list[Event] = []
    assert settings.kafka_bootstrap is not None
    async with KafkaLogReader(settings.kafka_bootstrap, settings=settings) as reader:
        tps = await reader.partitions(topics)
        ends = await reader.end_offsets(tps)
        ranges = {tp: (0, end) for tp, end in ends.items() if end > 0}
        async for chunk in reader.read(ranges, 5000):
            found.extend(codec.decode(rec.value) for rec in chunk)
    return found


def single_writer(events: list[RunEvent]) -> list[str]:
    """What shows two live writers in one run's committed events (empty: none)."""
    problems = []
    by_seq: dict[int, set[str]] = {}
    for e in events:
        by_seq.setdefault(e.seq, set()).add(e.event_id)
    problems += [f"seq {s} written {len(ids)} times" for s, ids in by_seq.items() if len(ids) > 1]
    ordered = sorted(events, key=lambda e: e.seq)
    for before, after in itertools.pairwise(ordered):
        if after.fence < before.fence:
            problems.append(f"seq {after.seq} fence {after.fence} after fence {before.fence}")
    return problems


async def test_a_killed_primary_fails_over_and_views_stay_exact(
    ledger_settings: CommonSettings, redis_cluster: ClusterState, tmp_path: Path
) -> None:
    """SIGKILL a primary with runs in flight: its replica is promoted, every run finishes
    (resumed where the failover broke it), no run had two live writers, and `views verify`
    finds the live views equal to a replay of the log."""
    env = redis_cluster.env()
    settings = ledger_settings.model_copy(
        update={
            "redis_url": env["AGENTLEDGER_REDIS_URL"],
            "redis_cluster": True,
            "redis_ssl_cafile": Path(env["AGENTLEDGER_REDIS_SSL_CAFILE"]),
            "state_dir": tmp_path,
        }
    )
    runs = [f"fo-{n:02d}-{uuid.uuid4().hex[:6]}" for n in range(RUNS)]
    before = await roles(redis_cluster)
    # not node 0: the URL names it as the seed new clients discover the cluster from
    victim = max(i for i, role in before.items() if role == "primary")
    assert victim != 0
    proj = projector_settings(settings, projector_group=f"{settings.key_prefix}-proj")
    async with ProjectorProcess(proj) as projector:
        await projector.wait_ready()
        started = asyncio.Event()
        first = asyncio.create_task(run_all(worker(settings), runs, started))
        await started.wait()
        await asyncio.sleep(2 * THINK_S)  # steps, leases and views are being written
        assert kill_node(redis_cluster, victim)
        broken = await first

        async def promoted() -> dict[int, str]:
            return await roles(redis_cluster) if await cluster_ok(redis_cluster) else {}

        after = await until(
            promoted, lambda r: sum(v == "primary" for v in r.values()) == 3, timeout_s=60.0
        )
        assert victim not in after
        assert {i for i, v in after.items() if v == "primary"} != {
            i for i, v in before.items() if v == "primary"
        }
        left = await run_all(worker(settings), sorted(broken), asyncio.Event())
        assert left == {}
        await restart_node(redis_cluster, victim)  # back as a replica of the new primary
        names = topic_names(settings)
        events = [
            e for e in await log_events(settings, list(names.run_topics)) if isinstance(e, RunEvent)
        ]
        async with WorkerPorts(worker(settings)) as ports:
            views = {r: await fold_log(ports.log, r) for r in runs}
        assert {r: v.status for r, v in views.items()} == dict.fromkeys(runs, "succeeded")
        for run in runs:
            assert single_writer([e for e in events if e.run_id == run]) == [], run
        async with RedisViewStore.from_url(
            str(settings.redis_url), key_prefix=settings.key_prefix, settings=settings
        ) as store:

            async def succeeded() -> set[str]:
                return set(await store.runs_by_status("succeeded"))

            listed = await until(succeeded, lambda s: set(runs) <= s, timeout_s=90.0)
            assert set(runs) <= listed
        code, out = await verify_views(settings)
        assert code == 0, out[-3000:]
    alerts = [e for e in await log_events(settings, [names.alerts]) if isinstance(e, Alert)]
    assert {a.code for a in alerts} & FORBIDDEN == set()
