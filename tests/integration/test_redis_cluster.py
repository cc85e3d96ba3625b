"""Everything that talks to Redis, on a real Redis Cluster (3 primaries + 3 replicas, TLS, ACL).

Kafka is the session's single broker; Redis is a cluster started for this module by
``stack.redis_cluster`` with the certificates of ``stack.certs``. The worker SDK, the lease
store, the projector (a child process), the reconciler, the console's reads and ``views
verify`` all run with AGENTLEDGER_REDIS_CLUSTER=true against it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from agentledger._core.ports import WorkerPorts
from agentledger.console.reads import ConsoleReads, RunFilter
from agentledger.console.settings import ConsoleSettings
from agentledger.demo.agent import refund_agent, spec_for
from agentledger.errors import ConfigurationError
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.projector.testing import ProjectorProcess, projector_settings, settings_env, until
from agentledger.providers.memory import MemoryProvider
from agentledger.reconciler.app import open_reconciler
from agentledger.reconciler.settings import ReconcilerSettings
from agentledger.redisclient import check_mode, redis_client
from agentledger.settings import ArgumentsOnly, CommonSettings
from agentledger.stack.certs import ensure_certificates
from agentledger.stack.redis_cluster import ClusterState, start_cluster, stop_cluster, tls_of
from agentledger.views.keys import partitions_of
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Ledger, WorkerSettings
from tests.conftest import SESSION_STATE_DIR

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = SESSION_STATE_DIR / "redis-cluster-tests"


class ClusterWorkerSettings(ArgumentsOnly, WorkerSettings):
    """Worker settings from arguments only."""


class ClusterReconcilerSettings(ArgumentsOnly, ReconcilerSettings):
    """Reconciler settings from arguments only."""


class ClusterConsoleSettings(ArgumentsOnly, ConsoleSettings):
    """Console settings from arguments only."""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def redis_cluster() -> AsyncIterator[ClusterState]:
    """A TLS Redis Cluster for this module, stopped afterwards."""
    state = await start_cluster(ROOT, tls=tls_of(ensure_certificates(ROOT / "certs")))
    yield state
    await stop_cluster(ROOT)


@pytest_asyncio.fixture(loop_scope="session")
async def on_cluster(
    ledger_settings: CommonSettings, redis_cluster: ClusterState
) -> CommonSettings:
    """The test's topics on the session's Kafka, its keys on the Redis Cluster."""
    env = redis_cluster.env()
    return ledger_settings.model_copy(
        update={
            "redis_url": env["AGENTLEDGER_REDIS_URL"],
            "redis_cluster": True,
            "redis_ssl_cafile": Path(env["AGENTLEDGER_REDIS_SSL_CAFILE"]),
        }
    )


def worker(base: CommonSettings) -> WorkerSettings:
    """Worker settings of one test process."""
    return ClusterWorkerSettings(
        **base.model_dump(),
        transactional_id=f"rc-{uuid.uuid4().hex[:8]}",
        lease_ttl_ms=5_000,
        resume_barrier_s=0.0,
    )


async def run_refunds(settings: WorkerSettings, run_ids: list[str]) -> None:
    """Run the demo's refund agent to the end for each run, concurrently, in one worker."""
    provider = MemoryProvider(name="sandbox")
    async with WorkerPorts(settings) as ports:
        ledger = Ledger.from_settings(
            settings, log=ports.log, leases=ports.leases, providers={"sandbox": provider}
        )

        async def one(run_id: str, seed: int) -> None:
            async with ledger.run(spec_for(run_id, seed)) as run:
                await refund_agent(run, seed)

        await asyncio.gather(*(one(r, n) for n, r in enumerate(run_ids)))


async def cli(settings: CommonSettings, *args: str) -> tuple[int, str, str]:
    """``agentledger <args>`` with the settings in its environment (and no other AGENTLEDGER_)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env.update(settings_env(projector_settings(settings)))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_worker_projector_reconciler_and_console_run_on_a_redis_cluster(
    on_cluster: CommonSettings,
) -> None:
    """Runs written by the SDK (leases and run index on the cluster) are projected into a
    namespace sharded by partition, listed by status across every shard, pass `views verify`,
    are seen by the reconciler's pass and the console's reads; their leases were released."""
    runs = [f"rc-{n:02d}-{uuid.uuid4().hex[:6]}" for n in range(8)]
    settings = projector_settings(on_cluster, projector_group=f"{on_cluster.key_prefix}-proj")
    async with ProjectorProcess(settings) as projector:
        await projector.wait_ready()
        await run_refunds(worker(on_cluster), runs)
        async with RedisViewStore.from_url(
            str(on_cluster.redis_url), key_prefix=on_cluster.key_prefix, settings=on_cluster
        ) as views:

            async def succeeded() -> set[str]:
                return set(await views.runs_by_status("succeeded"))

            await until(succeeded, lambda done: set(runs) <= done, timeout_s=60.0)
            namespace = await views.live_namespace()
            assert namespace is not None
            assert partitions_of(namespace) == on_cluster.run_partitions
            loaded = await views.load_many(runs)
            assert {r: v.status for r, v in loaded.items()} == dict.fromkeys(runs, "succeeded")
            assert await views.open_intents() == []
        code, out, err = await cli(on_cluster, "views", "verify")
        assert code == 0, (out, err)
    async with RedisLeaseStore.from_settings(on_cluster) as leases:
        assert [await leases.current(r) for r in runs] == [None] * len(runs)
    reconciler = ClusterReconcilerSettings(**on_cluster.model_dump())
    async with open_reconciler(reconciler) as app:
        report = await app.reconciler.run_once()
    assert report.to_dict().get("errors", 0) == 0
    async with ConsoleReads(ClusterConsoleSettings(**on_cluster.model_dump())) as reads:
        listed = {row["run_id"] for row in await reads.runs(RunFilter(status="succeeded"))}
        assert set(runs) <= listed
        found = await reads.run(runs[0])
        assert found is not None
        assert found[0].status == "succeeded"


async def test_the_demo_kill_and_resume_passes_on_a_redis_cluster(
    on_cluster: CommonSettings, tmp_path: Path
) -> None:
    """`agentledger demo --kill-at after-provider-commit` (SIGKILL, wipe the key prefix, resume in
    a new process) reports every effect exactly once with Redis a cluster."""
    env_settings = on_cluster.model_copy(update={"state_dir": tmp_path})
    code, out, err = await cli(
        env_settings, "demo", "--runs", "3", "--kill-at", "after-provider-commit", "--flush",
        "namespace",
    )  # fmt: skip
    assert code == 0, (out[-2000:], err[-3000:])


async def test_a_cluster_client_against_a_single_redis_fails_naming_the_setting(
    ledger_settings: CommonSettings,
) -> None:
    """AGENTLEDGER_REDIS_CLUSTER=true against a plain Redis: `agentledger runs list` exits 2 with
    one line naming AGENTLEDGER_REDIS_CLUSTER, and the same in-process check raises it."""
    wrong = ledger_settings.model_copy(update={"redis_cluster": True})
    client = redis_client(str(wrong.redis_url), settings=wrong)
    try:
        with pytest.raises(ConfigurationError, match="AGENTLEDGER_REDIS_CLUSTER=false"):
            await check_mode(client, endpoint="redis")
    finally:
        await client.aclose()
    code, out, err = await cli(wrong, "views", "dump", "--run", "nothing")
    assert code == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "AGENTLEDGER_REDIS_CLUSTER" in lines[0]
    assert "Traceback" not in err


async def test_a_plain_client_against_a_cluster_fails_naming_the_setting(
    on_cluster: CommonSettings, redis_cluster: ClusterState
) -> None:
    """AGENTLEDGER_REDIS_CLUSTER=false against a cluster node exits 2 with one line naming the
    setting and without the password."""
    wrong = on_cluster.model_copy(update={"redis_cluster": False})
    code, out, err = await cli(wrong, "views", "dump", "--run", "nothing")
    assert code == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "AGENTLEDGER_REDIS_CLUSTER=true" in lines[0]
    assert redis_cluster.password not in err
    assert "Traceback" not in err
