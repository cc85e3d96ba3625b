"""Chaos on a fleet of three worker processes: one SIGKILLed mid-flight, one frozen past its
leases (SIGSTOP) and thawed. Every run finishes, every effect happens once, no view keeps a
zombie's write, and an alert names the zombie."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentledger.bus.publisher import KafkaPublisher
from agentledger.fleet import submit_run
from agentledger.fleet.testing import (
    WorkerProcess,
    fleet_settings,
    fold_runs,
    run_events,
    wait_until,
)
from agentledger.projector.testing import projector_settings
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from tests.chaos.fleet_support import (
    AGENT,
    effects_once,
    owners,
    running_fleet,
    taken_over,
    views_equal_the_fold,
    zombie_named,
)
from tests.integration.fleet_support import finished

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

RUNS = 50
LEASE_TTL_MS = 2_500
THINK_S = 5.0  # the model call of each run: long enough to catch runs mid-flight


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
    async with running_fleet(proj, ledger_settings, sandbox, workers, assigned_within_s=60):
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
        taken = await taken_over(common, frozen, frozen_runs, timeout_s=120)
        assert all(taken[r].worker_id != frozen.worker_id or taken[r].status == "succeeded"
                   for r in frozen_runs)  # fmt: skip
        frozen.thaw()
        views = await wait_until(lambda: fold_runs(common), finished(ids), timeout_s=240)
        assert {r: views[r].status for r in ids} == dict.fromkeys(ids, "succeeded")
        assert survivor.returncode is None
        # the projector has folded everything it will: Redis equals the fold of Kafka
        await views_equal_the_fold(common, views, ids, timeout_s=90)
    # every logical effect exactly once at the provider
    await effects_once(sandbox, views, ids)
    # the zombie is named, and nothing it wrote after losing its leases counts
    await zombie_named(common, frozen)
    # the killed worker's runs were handed off and finished elsewhere
    events = await run_events(common)
    orphans = [r for r, owner in going.items() if owner == killed.worker_id]
    handed = [r for r in orphans if views[r].worker_id != killed.worker_id]
    assert handed, f"none of {orphans} was finished by another worker"
    assert all(any(e.worker_id == killed.worker_id for e in events[r]) for r in handed)
