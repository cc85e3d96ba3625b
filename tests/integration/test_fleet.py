"""The fleet on the real local stack: requests in, runs out, duplicates harmless, lost leases."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import pytest
from redis.asyncio import Redis

from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.publisher import KafkaPublisher
from agentledger.demo.agent import expected_effects
from agentledger.errors import ProducerFencedError
from agentledger.fleet import FleetSettings, FleetWorker, request_resume, submit_run
from agentledger.fleet.examples import refund
from agentledger.fleet.testing import alerts, fold_runs, running_worker, wait_until
from agentledger.leasing import lease_key
from agentledger.providers.sandbox.process import SandboxProcess
from tests.integration.fleet_support import cli, finished, performed

pytestmark = pytest.mark.integration
FINISH_S = 120.0


@pytest.fixture
def fleet_overrides() -> dict[str, Any]:
    """These tests also give the fleet's consumer group a short session."""
    return {"fleet_session_timeout_ms": 6_000}


async def test_submitted_runs_finish_with_every_effect_performed_once(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """Runs submitted as requests are run concurrently by one worker to success, each of their
    effects reaching the provider exactly once."""
    agent = refund(fleet)
    ids = [f"{fleet.key_prefix}-r{i}" for i in range(8)]
    async with running_worker(fleet, agent):
        async with KafkaPublisher(fleet) as publisher:
            for seed, run_id in enumerate(ids):
                await submit_run(publisher, agent.name, {"seed": seed}, run_id=run_id)
        views = await wait_until(lambda: fold_runs(fleet), finished(ids), timeout_s=FINISH_S)
    assert {r: views[r].status for r in ids} == dict.fromkeys(ids, "succeeded")
    counts = await performed(sandbox)
    for seed, run_id in enumerate(ids):
        kinds = sorted(e.kind for e in views[run_id].effects.values())
        assert kinds == sorted(expected_effects(seed, run_id))
        assert all(counts[key] == 1 for key in views[run_id].effects)
    assert sum(counts.values()) == sum(len(views[r].effects) for r in ids)


async def test_duplicate_requests_and_other_agents_requests_change_nothing(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """The same run requested three times and resumed twice runs once; a request for another
    agent is left alone."""
    agent = refund(fleet)
    run_id, stranger = f"{fleet.key_prefix}-dup", f"{fleet.key_prefix}-stranger"
    async with running_worker(fleet, agent) as worker:
        async with KafkaPublisher(fleet) as publisher:
            for _ in range(3):
                await submit_run(publisher, agent.name, {"seed": 3}, run_id=run_id)
                await request_resume(publisher, run_id, reason="test duplicate")
            await submit_run(publisher, "another-agent", {"seed": 3}, run_id=stranger)
        views = await wait_until(lambda: fold_runs(fleet), finished([run_id]), timeout_s=FINISH_S)
        await wait_until(
            lambda: asyncio.sleep(0, dict(worker.outcomes)),
            lambda o: stranger in o,
            timeout_s=30,
        )
        assert worker.outcomes[stranger].status == "skipped"
    view = views[run_id]
    assert view.status == "succeeded"
    assert stranger not in views
    assert [s.attempts for s in sorted(view.steps.values(), key=lambda s: s.step)] == [1] * 5
    counts = await performed(sandbox)
    assert sorted(counts.values()) == [1] * len(view.effects)


async def test_a_worker_that_loses_a_lease_abandons_the_run_and_names_itself(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """When another writer takes a run's lease, the worker stops the run at once, writes
    nothing more to it, and raises a lease.lost alert naming itself."""
    agent = refund(fleet)
    run_id = f"{fleet.key_prefix}-slow"
    assert fleet.redis_url is not None
    redis = Redis.from_url(fleet.redis_url)
    try:
        async with running_worker(fleet, agent) as worker:
            async with KafkaPublisher(fleet) as publisher:
                await submit_run(publisher, agent.name, {"seed": 1, "think_s": 30}, run_id=run_id)
            key = lease_key(fleet.key_prefix, run_id)
            await wait_until(
                lambda: redis.hget(key, "owner"), lambda o: o == fleet.worker_id.encode(),
                timeout_s=60,
            )  # fmt: skip
            fence = int(await redis.hget(key, "fence") or 0)
            await redis.hset(key, mapping={"owner": "thief", "fence": fence + 1})
            await wait_until(
                lambda: asyncio.sleep(0, dict(worker.outcomes)),
                lambda o: run_id in o,
                timeout_s=30,
            )
            assert worker.outcomes[run_id].status == "abandoned"
        found = [a for a in await alerts(fleet) if a.run_id == run_id]
        views = await fold_runs(fleet)
    finally:
        await redis.aclose()
    assert [(a.code, a.worker_id) for a in found] == [("lease.lost", fleet.worker_id)]
    assert views[run_id].status == "running"
    assert views[run_id].cursor == 1  # stopped in the slow "decide" step: nothing after it
    assert sum((await performed(sandbox)).values()) == 0


async def test_the_cli_submits_and_shows_a_run(fleet: FleetSettings) -> None:
    """``runs submit`` queues a run the worker finishes; ``runs show --json`` prints its steps
    with results and attempts and its effects with state and external reference."""
    agent = refund(fleet)
    run_id = f"{fleet.key_prefix}-cli"
    async with running_worker(fleet, agent):
        args = ["--agent", agent.name, "--input", '{"seed": 4}', "--run-id", run_id]
        submitted = json.loads(await cli(fleet, "runs", "submit", *args, "--json"))
        assert submitted["run_id"] == run_id
        await wait_until(lambda: fold_runs(fleet), finished([run_id]), timeout_s=FINISH_S)
    shown = json.loads(await cli(fleet, "runs", "show", run_id, "--json"))
    assert shown["status"] == "succeeded"
    assert shown["source"] == "log"  # no projector in this test: folded from Kafka
    assert [s["name"] for s in shown["steps"]] == list(agent.spec(run_id, None).plan)
    assert all(s["attempts"] == 1 and s["result_json"] != "null" for s in shown["steps"])
    assert shown["effects"]
    assert all(e["state"] == "succeeded" and e["external_ref"] for e in shown["effects"])
    assert shown["owner"] is None
    assert shown["fence"] >= 1


async def test_a_worker_whose_producer_is_fenced_stops_and_says_so(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """When another process takes the worker's transactional id, the worker stops with
    ProducerFencedError and publishes an alert naming itself; its run is left to the fleet."""
    agent = refund(fleet)
    run_id = f"{fleet.key_prefix}-fenced"
    worker = FleetWorker(fleet, agent)
    serving = asyncio.get_running_loop().create_task(worker.serve(asyncio.Event()))
    async with KafkaPublisher(fleet) as publisher:
        await submit_run(publisher, agent.name, {"seed": 2, "think_s": 3}, run_id=run_id)
    await wait_until(
        lambda: fold_runs(fleet), lambda v: run_id in v and v[run_id].cursor >= 1, timeout_s=60
    )
    async with KafkaEventLog(fleet, transactional_id=fleet.producer_id):
        # the worker's next commit meets the newer producer of its transactional id
        with pytest.raises(ProducerFencedError):
            await asyncio.wait_for(serving, timeout=60)
    found = [a for a in await alerts(fleet) if a.worker_id == fleet.worker_id]
    assert [(a.code, a.run_id) for a in found] == [("fence.stale", None)]
    assert (await fold_runs(fleet))[run_id].status == "running"
    assert sum((await performed(sandbox)).values()) == 0


async def test_a_worker_calls_its_started_hook_once_set_up_and_leaves_the_collector_alone(
    fleet: FleetSettings, sandbox: SandboxProcess
) -> None:
    """``serve`` calls ``started`` once, after set-up and before the first request is carried
    out; the worker itself (embedded in a host, as here) does not touch the collector."""
    del sandbox
    agent = refund(fleet)
    run_id = f"{fleet.key_prefix}-started"
    worker = FleetWorker(fleet, agent)
    calls: list[int] = []
    collector = (gc.get_threshold(), gc.get_freeze_count())
    stop = asyncio.Event()
    serving = asyncio.get_running_loop().create_task(
        worker.serve(stop, started=lambda: calls.append(len(worker.history)))
    )
    try:
        async with KafkaPublisher(fleet) as publisher:
            await submit_run(publisher, agent.name, {"seed": 5}, run_id=run_id)
        await wait_until(lambda: fold_runs(fleet), finished([run_id]), timeout_s=FINISH_S)
    finally:
        stop.set()
        await serving
    assert calls == [0]
    assert (gc.get_threshold(), gc.get_freeze_count()) == collector
