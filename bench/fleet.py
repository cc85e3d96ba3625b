"""``python -m bench.fleet [--quick] [--json FILE]``: the worker fleet, measured on this machine.

- Checkpointed steps per second across 200 concurrent runs, with one worker process and with
  three (``agentledger worker`` processes of the ``bench-steps`` agent: each step records a 1 KB
  model result and checkpoints; no provider calls, so the figure is the fleet's own cost).
- Hand-off: two workers, a projector and a reconciler; one worker is SIGKILLed mid-flight. For
  each run it held: from its lease's expiry (Redis server time) to the first step the other
  worker started, with the moment the run was re-queued in between.

Endpoints come from AGENTLEDGER_KAFKA_BOOTSTRAP / AGENTLEDGER_REDIS_URL, else the local stack.
Every measurement gets its own topics and keys, deleted afterwards. Output: one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from redis.asyncio import Redis

from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.bus.publisher import KafkaPublisher
from agentledger.events.codec import EventCodec
from agentledger.events.models import (
    Event,
    ResumeRequested,
    RunFinished,
    RunResumed,
    StepCheckpointed,
    StepStarted,
    now_ms,
)
from agentledger.events.topics import topic_names, topic_specs
from agentledger.fleet import FleetSettings, submit_run
from agentledger.fleet.examples import BENCH_AGENT
from agentledger.fleet.testing import WorkerProcess, fleet_settings, wait_until
from agentledger.leasing import lease_key
from agentledger.settings import CommonSettings
from agentledger.stack import resolve_endpoints

AGENT = "agentledger.fleet.examples:steps"
PAYLOAD_BYTES = 1024
#: The reconciler's orphan scan: how often, and how long a run must be idle (it must also have
#: no live lease). Defaults are 30 s each; a fleet that wants fast hand-offs sets them low.
WATCH_S = 0.5
ORPHAN_GRACE_MS = 1_000


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextlib.asynccontextmanager
async def deployment(base: CommonSettings, name: str) -> AsyncIterator[CommonSettings]:
    """Fresh topics and Redis keys for one measurement, removed afterwards."""
    tag = f"bf{name}{uuid.uuid4().hex[:6]}"
    settings = base.model_copy(update={"topic_prefix": f"{tag}.", "key_prefix": tag})
    specs = topic_specs(settings)
    await ensure_topics(settings, specs)
    try:
        yield settings
    finally:
        await delete_topics(settings, [s.name for s in specs])
        assert settings.redis_url is not None
        client = Redis.from_url(settings.redis_url)
        try:
            keys = [k async for k in client.scan_iter(match=f"{tag}*", count=1000)]
            for i in range(0, len(keys), 500):
                await client.delete(*keys[i : i + 500])
        finally:
            await client.aclose()


class Follower:
    """Follows topics from the beginning (read_committed) and keeps the decoded events."""

    def __init__(self, settings: CommonSettings, topics: list[str]) -> None:
        assert settings.kafka_bootstrap is not None
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=settings.kafka_bootstrap,
            group_id=None,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        self._topics = topics
        self._partitions = settings.run_partitions
        self._codec = EventCodec()
        self.events: list[Event] = []

    async def __aenter__(self) -> Follower:
        await self._consumer.start()
        self._consumer.assign(
            [TopicPartition(t, p) for t in self._topics for p in range(self._partitions)]
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._consumer.stop()

    async def poll(self) -> list[Event]:
        """Read what is new; return everything read so far."""
        batches = await self._consumer.getmany(timeout_ms=100, max_records=20_000)
        for records in batches.values():
            self.events.extend(self._codec.decode(r.value) for r in records)
        return self.events

    def of(self, kind: type[Event]) -> list[Any]:
        """The events of one type."""
        return [e for e in self.events if isinstance(e, kind)]


async def _settled_group(workers: list[WorkerProcess], partitions: int) -> None:
    shares = await wait_until(
        lambda: asyncio.sleep(0, [w.assigned() for w in workers]),
        lambda got: all(got) and sum(len(g or ()) for g in got) == partitions,
        timeout_s=90,
    )
    if not all(shares):
        msg = f"the worker group did not settle: {shares}"
        raise RuntimeError(msg)


async def throughput(
    base: CommonSettings, *, workers: int, runs: int, steps: int, log_dir: Path
) -> dict[str, Any]:
    """Checkpointed steps/s of ``runs`` concurrent runs on ``workers`` worker processes."""
    async with deployment(base, f"t{workers}") as dep:
        settings = fleet_settings(dep, use_views=False, resume_barrier_s=0.0, lease_ttl_ms=15_000)
        procs = [
            WorkerProcess(
                settings.model_copy(update={"worker_id": f"{dep.key_prefix}-w{i}"}),
                AGENT,
                log_dir=log_dir,
                concurrency=runs,
            )
            for i in range(workers)
        ]
        names = topic_names(dep)
        async with contextlib.AsyncExitStack() as stack:
            for proc in procs:
                await stack.enter_async_context(proc)
            await _settled_group(procs, dep.run_partitions)
            follower = await stack.enter_async_context(Follower(dep, [names.steps]))
            value = {"steps": steps, "bytes": PAYLOAD_BYTES}
            started = now_ms()
            async with KafkaPublisher(dep) as publisher:
                for i in range(runs):
                    await submit_run(publisher, BENCH_AGENT, value, run_id=f"{dep.key_prefix}-{i}")
            await wait_until(
                follower.poll, lambda _: len(follower.of(RunFinished)) >= runs, timeout_s=600
            )
        checkpoints: list[StepCheckpointed] = follower.of(StepCheckpointed)
        finished: list[RunFinished] = follower.of(RunFinished)
        last = max(e.occurred_at for e in checkpoints)
        first = min(e.occurred_at for e in follower.of(StepStarted))
        per_run = _run_spans(follower)
        return {
            "workers": workers,
            "runs": runs,
            "steps_per_run": steps,
            "payload_bytes": PAYLOAD_BYTES,
            "checkpoints": len(checkpoints),
            "finished": len(finished),
            "seconds": round((last - started) / 1000, 3),
            "steps_per_s": round(len(checkpoints) / max((last - started) / 1000, 1e-9), 1),
            "steps_per_s_after_first_step": round(
                len(checkpoints) / max((last - first) / 1000, 1e-9), 1
            ),
            "run_seconds_p50": round(statistics.median(per_run), 3),
            "run_seconds_max": round(max(per_run), 3),
        }


def _run_spans(follower: Follower) -> list[float]:
    begin: dict[str, int] = {}
    end: dict[str, int] = {}
    for e in follower.events:
        if isinstance(e, StepStarted):
            begin[e.run_id] = min(begin.get(e.run_id, e.occurred_at), e.occurred_at)
        if isinstance(e, RunFinished):
            end[e.run_id] = e.occurred_at
    return [(end[r] - begin[r]) / 1000 for r in end if r in begin]


async def handoff(base: CommonSettings, *, runs: int, log_dir: Path) -> dict[str, Any]:
    """From lease expiry to the first resumed step, for every run of a SIGKILLed worker."""
    from agentledger.projector.testing import ProjectorProcess, projector_settings  # noqa: PLC0415
    from agentledger.reconciler.app import open_reconciler, serve  # noqa: PLC0415
    from agentledger.reconciler.settings import ReconcilerSettings  # noqa: PLC0415

    ttl = 3_000
    async with deployment(base, "h") as dep:
        settings: FleetSettings = fleet_settings(
            dep, lease_ttl_ms=ttl, kafka_transaction_timeout_ms=3_000,
            fleet_session_timeout_ms=6_000, fleet_heartbeat_ms=1_000, resume_barrier_s=2.0,
        )  # fmt: skip
        rec = ReconcilerSettings(
            **dep.model_dump(), reconciler_id=f"{dep.key_prefix}-rec",
            reconciler_orphan_grace_ms=ORPHAN_GRACE_MS, reconciler_intent_grace_ms=ttl,
            reconciler_poll_interval_s=0.25, reconciler_watch_interval_s=WATCH_S,
            alerts_log=False,
        )  # fmt: skip
        killed, other = (
            WorkerProcess(
                settings.model_copy(update={"worker_id": f"{dep.key_prefix}-{n}"}),
                AGENT,
                log_dir=log_dir,
                concurrency=runs,
            )
            for n in ("a", "b")
        )
        names = topic_names(dep)
        assert dep.redis_url is not None
        redis = Redis.from_url(dep.redis_url)
        stop = asyncio.Event()
        try:
            async with (
                ProjectorProcess(
                    projector_settings(dep, projector_group=f"{dep.key_prefix}-p")
                ) as projector,
                open_reconciler(rec) as app,
                killed,
                other,
                Follower(dep, [names.steps, names.requests]) as follower,
            ):
                await projector.wait_ready()
                task = asyncio.get_running_loop().create_task(serve(app, stop, relay=False))
                await _settled_group([killed, other], dep.run_partitions)
                ids = [f"{dep.key_prefix}-{i}" for i in range(runs)]
                async with KafkaPublisher(dep) as publisher:
                    for run_id in ids:
                        value = {"steps": 8, "bytes": PAYLOAD_BYTES, "think_s": 1.0}
                        await submit_run(publisher, BENCH_AGENT, value, run_id=run_id)
                keys = {r: lease_key(dep.key_prefix, r) for r in ids}

                async def held_by_killed() -> list[str]:
                    owners = {r: await redis.hget(k, "owner") for r, k in keys.items()}
                    await follower.poll()
                    going = {e.run_id for e in follower.of(StepCheckpointed)}
                    return [r for r, o in owners.items() if o == killed.worker_id.encode()
                            and r in going]  # fmt: skip

                victims = await wait_until(
                    held_by_killed, lambda v: len(v) >= max(1, runs // 3), timeout_s=120
                )
                killed.kill()
                killed_at = now_ms()
                await asyncio.sleep(0.2)
                expiry = {r: int(await redis.hget(keys[r], "expires_at") or 0) for r in victims}
                await wait_until(
                    follower.poll, lambda _: len(follower.of(RunFinished)) >= runs, timeout_s=300
                )
                stop.set()
                await task
        finally:
            await redis.aclose()
        return _handoff_figures(
            follower, killed.worker_id, victims=victims, expiry=expiry, killed_at=killed_at, ttl=ttl
        )


def _handoff_figures(
    follower: Follower,
    killed: str,
    *,
    victims: list[str],
    expiry: dict[str, int],
    killed_at: int,
    ttl: int,
) -> dict[str, Any]:
    requeued: dict[str, int] = {}
    resumed: dict[str, int] = {}
    stepped: dict[str, int] = {}
    for e in follower.events:
        if isinstance(e, ResumeRequested) and e.occurred_at >= killed_at:
            requeued.setdefault(e.run_id, e.occurred_at)
        if isinstance(e, RunResumed) and e.worker_id != killed:
            resumed.setdefault(e.run_id, e.occurred_at)
        if isinstance(e, StepStarted) and e.worker_id != killed:
            stepped.setdefault(e.run_id, e.occurred_at)

    def spread(values: list[float]) -> dict[str, float] | None:
        if not values:
            return None
        return {
            "p50": round(statistics.median(values), 3),
            "min": round(min(values), 3),
            "max": round(max(values), 3),
        }

    to_step = [(stepped[r] - expiry[r]) / 1000 for r in victims if r in stepped]
    return {
        "lease_ttl_ms": ttl,
        "reconciler_watch_interval_s": WATCH_S,
        "reconciler_orphan_grace_ms": ORPHAN_GRACE_MS,
        "runs_of_killed_worker": len(victims),
        "handed_off": len(to_step),
        "expiry_after_kill_s": spread([(expiry[r] - killed_at) / 1000 for r in victims]),
        "expiry_to_requeue_s": spread(
            [(requeued[r] - expiry[r]) / 1000 for r in victims if r in requeued]
        ),
        "expiry_to_resumed_s": spread(
            [(resumed[r] - expiry[r]) / 1000 for r in victims if r in resumed]
        ),
        "expiry_to_first_step_s": spread(to_step),
    }


async def measure(base: CommonSettings, *, quick: bool) -> dict[str, Any]:
    """Every fleet figure, as one JSON-able object."""
    endpoints = await resolve_endpoints(base)
    settings = base.model_copy(
        update={"kafka_bootstrap": endpoints.kafka_bootstrap, "redis_url": endpoints.redis_url}
    )
    runs, steps = (50, 5) if quick else (200, 10)
    results: dict[str, Any] = {"quick": quick, "throughput": []}
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp:
        logs = Path(tmp)
        for workers in (1, 3):
            _say(f"fleet: {runs} runs x {steps} steps on {workers} worker(s)")
            t0 = time.monotonic()
            figures = await throughput(settings, workers=workers, runs=runs, steps=steps,
                                       log_dir=logs)  # fmt: skip
            figures["wall_s"] = round(time.monotonic() - t0, 1)
            results["throughput"].append(figures)
            _say(f"  {figures['steps_per_s']} checkpointed steps/s")
        _say("fleet: hand-off after a SIGKILL")
        results["handoff"] = await handoff(settings, runs=12 if quick else 30, log_dir=logs)
        _say(f"  expiry -> first resumed step: {results['handoff']['expiry_to_first_step_s']}")
    return results


def main(argv: list[str] | None = None) -> None:
    """Parse the command line, measure, print (and write) the JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="50 runs x 5 steps; 12 hand-offs")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    from agentledger.cli import configure_logging  # noqa: PLC0415

    configure_logging("WARNING")
    results = asyncio.run(measure(CommonSettings(), quick=args.quick))
    text = json.dumps(results, indent=2, sort_keys=True)
    if args.json is not None:
        args.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
