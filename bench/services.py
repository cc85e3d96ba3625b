"""agentledger's own services in the bench: projector events/s, rebuild events/s, reconciler
intents/s — each measured by its owner's bench module (``python -m bench.projector`` …), run
here as a subprocess on the same stack, repeated, with the floor it reports beside it."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentledger.settings import CommonSettings
from bench.harness import Spread, format_spread, spread
from bench.peers.base import Env

SERVICE_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class ServiceBench:
    """A bench module of another component and how to read its JSON report."""

    module: str
    quick_args: tuple[str, ...]
    full_args: tuple[str, ...]
    # our figure key -> path of keys into the module's JSON report
    figures: Mapping[str, tuple[str, ...]]
    # our figure key -> (label, path) of each floor the module measured beside it
    floors: Mapping[str, Sequence[tuple[str, tuple[str, ...]]]] = field(default_factory=dict)
    quick_repeats: int = 1
    full_repeats: int = 2


KAFKA_CONSUME_FLOOR = (
    "raw read_committed aiokafka consume loop",
    ("floor", "kafka_consume_records_per_s"),
)
REDIS_WRITE_FLOOR = ("pipelined Redis HSETs", ("floor", "redis_pipelined_writes_per_s"))

SERVICES: tuple[ServiceBench, ...] = (
    ServiceBench(
        module="bench.projector",
        # at least a few batches (2,000 events each): the rate runs from the first applied
        # batch to the last, so 2,000 events (one batch) gave 0 /s
        # (no broker warm-up: 50 runs/s is not issue 13's lag load, and it would add a minute)
        quick_args=(
            "--events",
            "10000",
            "--lag-rate",
            "50",
            "--lag-seconds",
            "2",
            "--broker-warmup-seconds",
            "0",
        ),
        # issue 13's sizes: 200,000 events folded by one projector and rebuilt, and the lag of
        # a steady 1,000 runs/s (8 events each) for 10 s; the 1,000,000-event rebuild has its
        # own command (`python -m bench.projector --events 1000000 --rebuild-only`, ~1.5 min)
        full_args=("--events", "200000", "--lag-rate", "1000", "--lag-seconds", "10"),
        figures={
            "projector_events_s": ("projector", "events_applied_per_s"),
            "rebuild_events_s": ("rebuild", "events_per_s"),
            "projector_lag_p50_ms": ("end_to_end", "lag_p50_ms"),
            "projector_lag_p99_ms": ("end_to_end", "lag_p99_ms"),
        },
        floors={
            "projector_events_s": (KAFKA_CONSUME_FLOOR, REDIS_WRITE_FLOOR),
            "rebuild_events_s": (KAFKA_CONSUME_FLOOR, REDIS_WRITE_FLOOR),
        },
    ),
    ServiceBench(
        module="bench.reconciler",
        quick_args=("--intents", "100"),
        full_args=("--intents", "500"),
        figures={"reconciler_intents_s": ("intents_resolved_per_s",)},
        floors={
            "reconciler_intents_s": (("bare provider lookups", ("floor_bare_lookups_per_s",)),)
        },
    ),
)


def dig(report: Mapping[str, Any], path: Sequence[str]) -> float | None:
    """The number at ``path`` in a nested JSON report, or None when it is not there."""
    node: Any = report
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else None


def _run_module(bench: ServiceBench, args: Sequence[str], env: Env) -> dict[str, Any]:
    """One run of the module; its JSON report (or an ``error``)."""
    with tempfile.TemporaryDirectory(prefix="agentledger-bench-svc-") as tmp:
        out = Path(tmp) / "report.json"
        child_env = {
            **os.environ,
            "AGENTLEDGER_KAFKA_BOOTSTRAP": env.kafka_bootstrap or "",
            "AGENTLEDGER_REDIS_URL": env.redis_url or "",
        }
        try:
            proc = subprocess.run(
                [sys.executable, "-m", bench.module, *args, "--json", str(out)],
                capture_output=True,
                text=True,
                timeout=SERVICE_TIMEOUT_S,
                check=False,
                env=child_env,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {SERVICE_TIMEOUT_S:.0f} s"}
        if proc.returncode != 0 or not out.exists():
            return {"error": f"exit {proc.returncode}: {(proc.stderr or proc.stdout)[-800:]}"}
        report: dict[str, Any] = json.loads(out.read_text())
        return report


def summarize(
    bench: ServiceBench, reports: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, Spread], list[str]]:
    """Figures (spread over the repeats) and notes (floors, missing keys) of one module."""
    figures: dict[str, Spread] = {}
    notes: list[str] = []
    for key, path in bench.figures.items():
        values = [v for r in reports if (v := dig(r, path)) is not None]
        if not values:
            notes.append(f"{key}: {bench.module} reported no {'.'.join(path)}")
            continue
        figures[key] = spread(values)
        for label, floor_path in bench.floors.get(key, ()):
            floors = [v for r in reports if (v := dig(r, floor_path)) is not None]
            if floors:
                floor = spread(floors)
                notes.append(
                    f"{key}: {format_spread(figures[key], '/s')} vs floor ({label}) "
                    f"{format_spread(floor, '/s')} = {figures[key].median / floor.median:.3g}x"
                )
    return figures, notes


async def measure_services(
    settings: CommonSettings, env: Env, *, quick: bool
) -> tuple[dict[str, Spread], list[str], dict[str, Any]]:
    """(figures, notes, raw reports); an absent or failing module is a note with the reason."""
    del settings  # the endpoints travel in ``env``; each module builds its own settings
    figures: dict[str, Spread] = {}
    notes: list[str] = []
    raw: dict[str, Any] = {}
    for bench in SERVICES:
        if importlib.util.find_spec(bench.module) is None:
            notes.extend(
                f"{key}: not measured — {bench.module} does not exist yet" for key in bench.figures
            )
            continue
        args = bench.quick_args if quick else bench.full_args
        repeats = bench.quick_repeats if quick else bench.full_repeats
        reports = []
        for _ in range(repeats):
            report = await asyncio.to_thread(_run_module, bench, args, env)
            if "error" in report:
                notes.append(f"{bench.module}: failed — {report['error']}")
                break
            reports.append(report)
        raw[bench.module] = reports
        found, found_notes = summarize(bench, reports)
        figures.update(found)
        notes.extend(found_notes)
    return figures, notes, raw
