"""``python -m bench.reconciler``: intents resolved per second against the sandbox provider.

On the real stack (local stack unless AGENTLEDGER_KAFKA_BOOTSTRAP/REDIS_URL are set) and fresh
topics: ``--intents`` runs each left with one open intent by a writer that is gone (half of the
effects performed at the sandbox, half never sent), a projector in its own process folding the
topics into Redis, and a sandbox provider subprocess whose lookups take ``--latency-ms`` more.
Then ``--instances`` reconcilers (in this process) make one pass together; the figure is intents
resolved (LANDED or NOT_LANDED, written as the lease holder, ResumeRequested published) per
second of that pass, and the CPU time the reconcilers spent per intent (this process's user +
sys during the pass; ``--profile FILE`` writes a cProfile of it). For scale, the floor: the same
number of bare lookups at the sandbox with the same latency and concurrency, measured just before
and just after the pass (the higher of the two counts). JSON on stdout (or ``--json FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import platform
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from agentledger._core.gc_tuning import tune_collector
from agentledger._core.keys import effect_key
from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.bus.kafka import KafkaEventLog
from agentledger.events.models import EffectIntended, Event, RunStarted, StepStarted
from agentledger.events.topics import topic_specs
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.projector.testing import ProjectorProcess, projector_settings
from agentledger.providers.faults import FaultRule
from agentledger.providers.http import HttpProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.reconciler.app import open_reconciler
from agentledger.reconciler.settings import ProviderPolicy, ReconcilerSettings
from agentledger.settings import CommonSettings
from agentledger.stack.resolve import resolve_settings
from agentledger.views.redis_store import RedisViewStore
from bench.output import print_report

REQUEST = EffectRequest(kind="payments", identity={"amount": 1250, "currency": "EUR"})
EFFECT = "charge"


async def _open_intents(settings: CommonSettings, sandbox_url: str, intents: int) -> list[str]:
    """Runs whose writer left one intent each; every other effect performed at the sandbox."""
    keys: list[str] = []
    async with (
        RedisLeaseStore.from_settings(settings) as leases,
        KafkaEventLog(settings, transactional_id=f"{settings.topic_prefix}dead-worker") as log,
    ):
        events: list[Event] = []
        for n in range(intents):
            run_id = f"run-{n:06d}"
            lease = await leases.acquire(run_id, "w-gone", 60_000)
            key = effect_key(run_id, 0, EFFECT, 0)
            keys.append(key)
            env = {"run_id": run_id, "fence": lease.fence, "worker_id": "w-gone"}
            events += [
                RunStarted(**env, seq=1, agent="bench", plan=[EFFECT]),
                StepStarted(**env, seq=2, step=0, step_name=EFFECT, attempt=1),
                _intent(run_id, key, lease.fence),
            ]
            await leases.release(lease)
        for i in range(0, len(events), 3_000):
            await log.publish(events[i : i + 3_000])
    async with HttpProvider(sandbox_url, name="sandbox") as provider:
        limit = asyncio.Semaphore(16)

        async def perform(key: str) -> None:
            async with limit:
                await provider.perform(REQUEST, key)

        await asyncio.gather(*(perform(k) for k in keys[::2]))
    return keys


def _intent(run_id: str, key: str, fence: int) -> Event:
    return EffectIntended(
        run_id=run_id, seq=3, fence=fence, worker_id="w-gone", step=0, ordinal=0,
        effect=EFFECT, provider="sandbox", kind=REQUEST.kind, idempotency_key=key,
        identity_hash=REQUEST.identity_hash, payload_hash=REQUEST.payload_hash,
    )  # fmt: skip


async def _wait_indexed(settings: CommonSettings, intents: int, timeout_s: float) -> float:
    """Seconds until the projector indexed every open intent."""
    assert settings.redis_url is not None
    started = time.perf_counter()
    async with RedisViewStore.from_url(settings.redis_url, key_prefix=settings.key_prefix) as v:
        while len(await v.open_intents(limit=intents * 2)) < intents:
            if time.perf_counter() - started > timeout_s:
                msg = f"the projector did not index {intents} intents in {timeout_s}s"
                raise TimeoutError(msg)
            await asyncio.sleep(0.1)
    return time.perf_counter() - started


async def _floor(url: str, keys: list[str], concurrency: int) -> tuple[float, float]:
    """Bare lookups per second at the sandbox with the same latency and concurrency, and the
    CPU seconds this process spent per lookup."""
    async with HttpProvider(url, name="sandbox") as provider:
        limit = asyncio.Semaphore(concurrency)

        async def one(key: str) -> None:
            async with limit:
                await provider.lookup(REQUEST.kind, key)

        cpu = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(one(k) for k in keys))
        rate = len(keys) / (time.perf_counter() - started)
        return rate, (time.process_time() - cpu) / len(keys)


async def bench(
    intents: int,
    latency_ms: int,
    instances: int,
    concurrency: int,
    batch: int | None = None,
    *,
    in_flight: int | None = None,
    barrier_s: float | None = None,
    profile: Path | None = None,
) -> dict[str, Any]:
    """Set everything up on fresh topics, run the pass, return the report."""
    tag = f"benchrec{uuid.uuid4().hex[:8]}"
    base = await resolve_settings(CommonSettings())
    common = base.model_copy(update={"topic_prefix": f"{tag}.", "key_prefix": tag})
    specs = topic_specs(common)
    await ensure_topics(common, specs)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            async with (
                ProjectorProcess(projector_settings(common)) as projector,
                SandboxProcess(Path(tmp) / "sandbox.sqlite3", synchronous="NORMAL") as sandbox,
                SandboxClient(sandbox.url) as client,
            ):
                await projector.wait_ready()
                keys = await _open_intents(common, sandbox.url, intents)
                indexed_s = await _wait_indexed(common, intents, 600)
                await client.set_faults(FaultRule(latency_ms=latency_ms, ops=frozenset({"lookup"})))
                policy = ProviderPolicy(concurrency=concurrency, attempts=2, timeout_s=10)
                tuning = _tuning(batch, in_flight, barrier_s)
                floor_before, floor_cpu = await _floor(sandbox.url, keys, concurrency * instances)
                looked_before = await client.lookups()
                settings = [
                    ReconcilerSettings(
                        **common.model_dump(),
                        provider_url=sandbox.url,
                        reconciler_id=f"{tag}-rec{i}",
                        reconciler_intent_grace_ms=0,
                        **tuning,
                        reconciler_scan_limit=intents * 2,
                        reconciler_default_provider=policy,
                        alerts_log=False,
                    )
                    for i in range(instances)
                ]
                result = await _pass(settings, profile)
                lookups = {
                    k: n - looked_before.get(k, 0) for k, n in (await client.lookups()).items()
                }
                floor_after, _ = await _floor(sandbox.url, keys, concurrency * instances)
    finally:
        await delete_topics(common, [s.name for s in specs])
    resolved = result["resolved"]
    # The higher of the floors taken just before and just after the pass: load on this shared
    # machine moves them, and the ratio must not gain from a slow moment.
    floor = max(floor_before, floor_after)
    used = settings[0]
    return {
        "bench": "reconciler",
        "intents": intents,
        "instances": instances,
        "lookup_latency_ms": latency_ms,
        "provider_concurrency_per_instance": concurrency,
        "batch_size": used.reconciler_batch_size,
        "run_concurrency": used.reconciler_run_concurrency,
        "batches_in_flight": used.reconciler_run_concurrency // used.reconciler_batch_size,
        "barrier_timeout_s": used.reconciler_barrier_timeout_s,
        "resolved": resolved,
        "landed": result["landed"],
        "not_landed": result["not_landed"],
        "pass_s": round(result["elapsed_s"], 3),
        "intents_resolved_per_s": round(resolved / result["elapsed_s"], 1),
        "reconciler_cpu_s": round(result["cpu_s"], 3),
        "reconciler_cpu_us_per_intent": round(result["cpu_s"] / max(1, resolved) * 1e6),
        "floor_bare_lookups_per_s": round(floor, 1),
        "floor_before_pass_per_s": round(floor_before, 1),
        "floor_after_pass_per_s": round(floor_after, 1),
        "floor_cpu_us_per_lookup": round(floor_cpu * 1e6),
        "ratio_to_floor": round(resolved / result["elapsed_s"] / floor, 3),
        "lookups_per_key_max": max(lookups.values()) if lookups else 0,
        "projector_index_s": round(indexed_s, 3),
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        },
    }


def _tuning(batch: int | None, in_flight: int | None, barrier_s: float | None) -> dict[str, Any]:
    """Reconciler settings the command line overrides (the rest keep their defaults)."""
    defaults = ReconcilerSettings.model_fields
    size = batch or int(defaults["reconciler_batch_size"].default)
    tuning: dict[str, Any] = {"reconciler_batch_size": size}
    if in_flight is not None:
        tuning["reconciler_run_concurrency"] = size * in_flight
    elif batch is not None:
        run_concurrency = int(defaults["reconciler_run_concurrency"].default)
        tuning["reconciler_run_concurrency"] = max(size, run_concurrency)
    if barrier_s is not None:
        tuning["reconciler_barrier_timeout_s"] = barrier_s
    return tuning


async def _pass(settings: list[ReconcilerSettings], profile: Path | None) -> dict[str, Any]:
    """One pass of every instance at once (no watch scan); summed counts, wall and CPU time.

    The reconcilers are the only thing this process runs during the pass (the projector and the
    sandbox are subprocesses), so its CPU time (user + sys) is theirs. The process is set up as
    ``agentledger reconciler`` sets up its own (the collector tuned once the reconcilers are
    open), so the pass pays what the service pays."""
    profiler = cProfile.Profile(time.process_time) if profile is not None else None
    async with AsyncExitStack() as stack:
        apps = [await stack.enter_async_context(open_reconciler(s)) for s in settings]
        tune_collector()
        cpu = time.process_time()
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        reports = await asyncio.gather(*(a.reconciler.run_once(watch=False) for a in apps))
        if profiler is not None:
            profiler.disable()
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
    if profiler is not None and profile is not None:
        profiler.dump_stats(str(profile))
    return {
        "elapsed_s": elapsed,
        "cpu_s": cpu,
        "resolved": sum(r.resolved for r in reports),
        "landed": sum(r.landed for r in reports),
        "not_landed": sum(r.not_landed for r in reports),
    }


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run, print JSON."""
    p = argparse.ArgumentParser(prog="python -m bench.reconciler", description=__doc__)
    p.add_argument("--intents", type=int, default=1000)
    p.add_argument("--latency-ms", type=int, default=10, help="added to every sandbox lookup")
    p.add_argument("--instances", type=int, default=1, help="reconcilers in this process")
    p.add_argument("--concurrency", type=int, default=16, help="lookups in flight per instance")
    p.add_argument("--batch", type=int, help="runs claimed per batch (default: the setting's)")
    p.add_argument("--in-flight", type=int, help="batches claimed at once (default: the setting's)")
    p.add_argument("--barrier-s", type=float, help="reconciler_barrier_timeout_s (default: its)")
    p.add_argument("--json", type=Path, help="also write the report to this file")
    p.add_argument("--profile", type=Path, help="write a cProfile of the pass to this file")
    a = p.parse_args(argv)
    print_report(
        lambda: bench(
            a.intents,
            a.latency_ms,
            a.instances,
            a.concurrency,
            a.batch,
            in_flight=a.in_flight,
            barrier_s=a.barrier_s,
            profile=a.profile,
        ),
        a.json,
    )


if __name__ == "__main__":
    main()
