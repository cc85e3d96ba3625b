"""The bench session: bring up the servers, measure each peer in its own process, report."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agentledger.cli import configure_logging
from agentledger.settings import CommonSettings
from agentledger.stack import resolve_endpoints
from bench.child import _spawn
from bench.machine import describe_machine
from bench.peers import OURS, PEERS
from bench.peers.base import Env
from bench.plot import write_plots
from bench.postgres import LocalPostgres
from bench.report import render
from bench.servers import BenchServerError, FsyncRedis
from bench.services import measure_services
from bench.warmup import warm_broker
from bench.workload import Params

MEASURE_TIMEOUT_S = 1500.0  # one peer's whole measurement (the full run's 10,000 steps)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


async def _servers(
    stack: contextlib.AsyncExitStack, settings: CommonSettings, work: Path
) -> tuple[Env, list[str]]:
    """Start or find every server; what could not start is a note, not a crash."""
    problems: list[str] = []
    endpoints = await resolve_endpoints(settings)
    local_kafka = settings.kafka_bootstrap is None
    env: dict[str, Any] = {
        "work_dir": str(work),
        "kafka_bootstrap": endpoints.kafka_bootstrap,
        "redis_url": endpoints.redis_url,
        "state_dir": str(settings.state_dir.resolve()) if local_kafka else None,
    }
    try:
        pg = await stack.enter_async_context(LocalPostgres())
        env.update(pg_dsn=pg.dsn(), pg_version=pg.version)
    except BenchServerError as e:
        problems.append(f"postgres: not started — {e}")
    try:
        redis = await stack.enter_async_context(FsyncRedis())
        env["fsync_redis_url"] = redis.url
    except BenchServerError as e:
        problems.append(f"fsync redis: not started — {e}")
    return Env(**env), problems


def _write_json(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")


def _measure_peer(name: str, env: Env, params: Params, work: Path) -> dict[str, Any]:
    args = [
        "measure",
        "--peer",
        name,
        "--env",
        json.dumps(env.to_json()),
        "--params",
        json.dumps(asdict(params)),
    ]
    result = _spawn(args, work / f"{name}.json", MEASURE_TIMEOUT_S)
    if "error" in result and "peer" not in result:
        return {"peer": name, "status": "error", "reason": result["error"], "errors": {}}
    return result


async def run_bench(
    settings: CommonSettings,
    *,
    quick: bool,
    peers: Sequence[str],
    command: str,
    json_out: Path | None,
    plots_dir: Path | None,
) -> dict[str, Any]:
    """Measure ``peers`` (agentledger first) and the agentledger services; print the report."""
    configure_logging("WARNING")
    params = Params.quick() if quick else Params.full()
    started = time.time()
    load_at_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="agentledger-bench-"))
    results: list[dict[str, Any]] = []
    async with contextlib.AsyncExitStack() as stack:
        _say("bench: starting servers (local stack, PostgreSQL, fsync Redis)")
        env, problems = await _servers(stack, settings, work)
        machine = describe_machine(env)  # the commit the run starts from, not where it ends
        warmup = None
        if env.kafka_bootstrap is not None:
            _say("bench: warming the broker (transactions until their p50 stops falling) …")
            warmup = await warm_broker(env)
        for name in peers:
            t0 = time.perf_counter()
            _say(f"bench: measuring {name} …")
            result = await asyncio.to_thread(_measure_peer, name, env, params, work)
            result["seconds"] = time.perf_counter() - t0
            _say(f"bench: {name}: {result.get('status')} in {result['seconds']:.0f} s")
            results.append(result)
        _say("bench: measuring the agentledger services (projector, rebuild, reconciler) …")
        services, service_notes, service_raw = await measure_services(settings, env, quick=quick)
    report: dict[str, Any] = {
        "meta": {
            **machine,
            "command": command,
            "quick": quick,
            "params": asdict(params),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": time.time() - started,
            "server_problems": problems,
            "broker_warmup": None if warmup is None else asdict(warmup),
            # Other processes on the machine skew every figure: say how busy it was.
            "load_avg_1_5_15_at_start": [round(x, 2) for x in load_at_start],
            "load_avg_1_5_15_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "peers": results,
        "services": {k: v.to_json() for k, v in services.items()},
        "service_notes": service_notes,
        "services_raw": service_raw,
    }
    notes = [*problems, *([] if warmup is None else [warmup.note()]), *service_notes]
    if quick:
        notes.append(
            "quick mode: bytes stop at 1,000 steps (10,000 in the full run); fewer, shorter repeats"
        )
    skipped = [n for n in PEERS if n not in peers]
    if skipped:
        notes.append(f"not run this time: {', '.join(skipped)} (python -m bench --peers …)")
    print(render(results, services, notes, OURS))
    print(
        f"\n(total {report['meta']['seconds']:.0f} s; load average at start "
        f"{load_at_start[0]:.1f}, at end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )
    shutil.rmtree(work, ignore_errors=True)  # GBs of full-snapshot SQLite files
    if json_out is not None:
        _write_json(json_out, report)
    if plots_dir is not None:
        for path in write_plots(report, plots_dir):
            _say(f"bench: wrote {path}")
    return report
