"""``python -m bench.checkpoint``: per-step checkpoint latency and bytes per step of one long run.

On the real stack (local stack unless AGENTLEDGER_KAFKA_BOOTSTRAP/REDIS_URL are set), one run of
``--steps`` steps, each returning a ~1 KB result, for three step shapes:

- ``plain``: the step's result checkpointed (StepStarted + AcceptanceEvaluated +
  StepCheckpointed in ONE transaction);
- ``activity``: a recorded model call (durable: its own commit) then the checkpoint;
- ``effect``: EffectIntended committed before the (in-process, instant) provider call, then the
  outcome + acceptance + checkpoint in one commit.

Reports p50/p99/mean step latency (a step returns only once its checkpoint is committed),
commits per step, bytes written per step (encoded Avro records incl. keys) early and late in the
run (flat = deltas, not snapshots), and how long a cold resume of the finished run takes (fold
from Kafka + replay of every step). JSON on stdout (or ``--json FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from agentledger._core.ports import WorkerPorts
from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.bus.partitioning import key_for
from agentledger.cli import configure_logging
from agentledger.events.codec import EventCodec
from agentledger.events.topics import topic_specs
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.stack.resolve import resolve_settings
from agentledger.testing import RecordingEventLog
from agentledger.worker import Ledger, Metered, RunSpec, Step, WorkerSettings

SHAPES = ("plain", "activity", "effect")


def payload(run_id: str, step: int, size: int) -> str:
    """``size`` hex characters, deterministic per (run, step), as incompressible as text."""
    out, n = "", 0
    while len(out) < size:
        out += hashlib.blake2b(f"{run_id}:{step}:{n}".encode(), digest_size=64).hexdigest()
        n += 1
    return out[:size]


def percentile(samples: list[float], q: float) -> float:
    """The q-quantile (0..1), nearest-rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


async def one_run(
    ledger: Ledger, log: RecordingEventLog, shape: str, steps: int, size: int
) -> dict[str, Any]:
    """One run of ``steps`` steps of ``shape``; latency and bytes figures."""
    run_id = f"bench-{shape}-{uuid.uuid4().hex[:8]}"
    plan = [f"s{i:05d}" for i in range(steps)]
    codec = EventCodec()
    latencies: list[float] = []
    bytes_per_step: list[int] = []

    async def body(step: Step) -> Any:
        text = payload(run_id, step.index, size)
        if shape == "activity":
            await step.activity("llm", lambda: _metered(text[:64]))
        if shape == "effect":
            request = EffectRequest(
                kind="emails", identity={"run": run_id, "step": step.index},
                free_text={"body": text[:64]},
            )  # fmt: skip
            await step.effect("notify", request)
        return {"message": text}

    async with ledger.run(RunSpec(run_id=run_id, agent="bench", plan=plan)) as run:
        for name in plan:
            before = len(log.batches)
            started = time.perf_counter()
            await run.step(name, body)
            latencies.append((time.perf_counter() - started) * 1000)
            written = [e for batch in log.batches[before:] for e in batch]
            bytes_per_step.append(
                sum(len(codec.encode(e)) + len(key_for(e) or b"") for e in written)
            )
        commits = run.commits
    t0 = time.perf_counter()
    async with ledger.run(RunSpec(run_id=run_id, agent="bench", plan=plan)) as again:
        opened = time.perf_counter() - t0
        for name in plan:
            await again.step(name, body)
    resumed = time.perf_counter() - t0
    tenth = max(1, steps // 10)
    return {
        "steps": steps,
        "p50_ms": round(percentile(latencies, 0.50), 3),
        "p99_ms": round(percentile(latencies, 0.99), 3),
        "mean_ms": round(statistics.fmean(latencies), 3),
        "max_ms": round(max(latencies), 3),
        "commits_per_step": round(commits / steps, 3),
        "bytes_per_step": round(statistics.fmean(bytes_per_step[1:]), 1),
        "bytes_per_step_first_10pct": round(statistics.fmean(bytes_per_step[1:tenth]), 1),
        "bytes_per_step_last_10pct": round(statistics.fmean(bytes_per_step[-tenth:]), 1),
        "first_step_bytes": bytes_per_step[0],  # carries RunStarted with the whole plan
        "bytes_total": sum(bytes_per_step),
        "resume_open_s": round(opened, 3),
        "resume_replay_all_s": round(resumed, 3),
    }


async def _metered(text: str) -> Metered[str]:
    return Metered(text, tokens=100, usd=0.0002)


async def bench(steps: int, size: int, shapes: list[str]) -> dict[str, Any]:
    """Run every shape on fresh topics; return the JSON report."""
    tag = f"bench{uuid.uuid4().hex[:8]}"
    base = await resolve_settings(WorkerSettings())
    settings = base.model_copy(
        update={
            "topic_prefix": f"{tag}.",
            "key_prefix": tag,
            "transactional_id": f"{tag}-producer",
            "resume_barrier_s": 0.0,
        }
    )
    specs = topic_specs(settings)
    await ensure_topics(settings, specs)
    results: dict[str, Any] = {}
    try:
        async with WorkerPorts(settings) as ports:
            log = RecordingEventLog(ports.log)
            ledger = Ledger.from_settings(
                settings, log=log, leases=ports.leases,
                providers={"sandbox": MemoryProvider(name="sandbox")},
            )  # fmt: skip
            for shape in shapes:
                results[shape] = await one_run(ledger, log, shape, steps, size)
    finally:
        await delete_topics(settings, [s.name for s in specs])
    return {
        "benchmark": "checkpoint",
        "steps_per_run": steps,
        "result_bytes": size,
        "shapes": results,
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
        "kafka": settings.kafka_bootstrap,
        "txn_retry_backoff_ms": settings.kafka_txn_retry_backoff_ms,
    }


def main(argv: list[str] | None = None) -> None:
    """Parse arguments and print (or write) the JSON report."""
    parser = argparse.ArgumentParser(prog="python -m bench.checkpoint", description=__doc__)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--result-bytes", type=int, default=1024)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--json", type=Path, default=None, help="write the report here too")
    args = parser.parse_args(argv)
    configure_logging("WARNING")  # logs to stderr; stdout is the JSON report
    shapes = [s for s in args.shapes.split(",") if s]
    report = asyncio.run(bench(args.steps, args.result_bytes, shapes))
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.json is not None:
        args.json.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
