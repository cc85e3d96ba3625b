"""From the raw samples of each peer to figures, tables and text: pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.harness import (
    LatencyRun,
    Metric,
    Spread,
    figure_table,
    format_value,
    growth_exponent,
    latency_figures,
    percentile,
    ratio_table,
    render_markdown,
    render_text,
    spread,
)

METRICS: tuple[Metric, ...] = (
    Metric("step_p50_ms", "step latency p50", "ms", "lower"),
    Metric("step_p99_ms", "step latency p99", "ms", "lower"),
    Metric("steps_per_s_1run", "steps/s, 1 run", "/s", "higher"),
    Metric("steps_per_s_many", "steps/s, 200 concurrent runs", "/s", "higher"),
    Metric("cpu_us_step_1run", "CPU µs per step, 1 run (this process)", "µs", "lower"),
    Metric("cpu_us_step_many", "CPU µs per step, 200 runs (this process)", "µs", "lower"),
    Metric("open_p50_ms", "opening a new run p50", "ms", "lower"),
    Metric("bytes_100", "bytes after 100 steps", "B", "lower"),
    Metric("bytes_1000", "bytes after 1,000 steps", "B", "lower"),
    Metric("bytes_10000", "bytes after 10,000 steps", "B", "lower"),
    Metric("resume_ms", "resume a 1,000-step run (open → ready)", "ms", "lower"),
    Metric("resume_process_ms", "resume incl. process start + imports", "ms", "lower"),
)
SERVICE_METRICS: tuple[Metric, ...] = (
    Metric("projector_events_s", "projector events/s (1 instance)", "/s", "higher"),
    Metric("rebuild_events_s", "rebuild events/s", "/s", "higher"),
    Metric("projector_lag_p50_ms", "projector lag p50 (ack -> view in Redis)", "ms", "lower"),
    Metric("projector_lag_p99_ms", "projector lag p99 (ack -> view in Redis)", "ms", "lower"),
    Metric("reconciler_intents_s", "reconciler intents/s", "/s", "higher"),
)


def figures_of(result: Mapping[str, Any]) -> dict[str, Spread]:
    """The figures of one peer from what its measuring process wrote."""
    out: dict[str, Spread] = {}
    lat = [LatencyRun(r["latencies"], r["elapsed"]) for r in result.get("latency_runs", [])]
    if lat:
        out.update(latency_figures(lat))
    cpu_lat = [r for r in result.get("latency_runs", []) if "cpu_s" in r]
    if cpu_lat:
        out["cpu_us_step_1run"] = spread(r["cpu_s"] * 1e6 / len(r["latencies"]) for r in cpu_lat)
    conc = result.get("concurrent_runs", [])
    if conc:
        out["steps_per_s_many"] = spread(c["runs"] * c["steps"] / c["elapsed"] for c in conc)
    cpu_conc = [c for c in conc if "cpu_s" in c]
    if cpu_conc:
        out["cpu_us_step_many"] = spread(
            c["cpu_s"] * 1e6 / (c["runs"] * c["steps"]) for c in cpu_conc
        )
    opens = result.get("open_s", [])
    if opens:
        out["open_p50_ms"] = spread([percentile([x * 1000.0 for x in opens], 50.0)])
    for mark, size in result.get("bytes", {}).items():
        out[f"bytes_{mark}"] = spread([float(size)])
    resumes = result.get("resume", [])
    if resumes:
        out["resume_ms"] = spread(r["resume_s"] * 1000.0 for r in resumes)
        out["resume_process_ms"] = spread(r["process_s"] * 1000.0 for r in resumes)
    return out


def projected_of(result: Mapping[str, Any]) -> dict[str, float]:
    """Bytes figures that were projected from the measured growth instead of run."""
    return {f"bytes_{k}": float(v) for k, v in result.get("bytes_projected", {}).items()}


def bytes_growth(result: Mapping[str, Any]) -> float | None:
    """The fitted exponent of bytes ~ steps^k over the measured marks."""
    return growth_exponent({int(k): float(v) for k, v in result.get("bytes", {}).items()})


def _cell_notes(results: Sequence[Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    for r in results:
        name = r["peer"]
        if r.get("status") != "ok":
            lines.append(f"{name}: NOT MEASURED — {r.get('reason', 'unknown reason')}")
            continue
        for figure, why in r.get("errors", {}).items():
            lines.append(f"{name}: {figure} not measured — {why}")
        for key, value in projected_of(r).items():
            lines.append(
                f"{name}: {key} projected {format_value(value, 'B')} — "
                f"{r.get('bytes_projected_reason', '')}"
            )
        k = bytes_growth(r)
        if k is not None:
            lines.append(f"{name}: bytes grow as steps^{k:.2f}")
        lines.extend(f"{name}: {n}" for n in r.get("notes", []))
    return lines


def tables(
    results: Sequence[Mapping[str, Any]], ours: str
) -> tuple[dict[str, dict[str, Spread]], list[str], list[str]]:
    """(figures by peer, measured peer names in order, notes)."""
    figures = {r["peer"]: figures_of(r) for r in results if r.get("status") == "ok"}
    names = [r["peer"] for r in results if r.get("status") == "ok"]
    return figures, names, _cell_notes(results)


def render(
    results: Sequence[Mapping[str, Any]],
    services: Mapping[str, Spread],
    service_notes: Sequence[str],
    ours: str,
    *,
    markdown: bool = False,
) -> str:
    """The whole report: figures, ratios of ours to every other peer, service figures, notes."""
    figures, names, notes = tables(results, ours)
    draw = render_markdown if markdown else render_text
    parts = [draw(figure_table(METRICS, names, figures))]
    others = [n for n in names if n != ours]
    if ours in figures and others:
        parts.append(draw(ratio_table(METRICS, ours, others, figures)))
    if services:
        parts.append(draw(figure_table(SERVICE_METRICS, [ours], {ours: dict(services)})))
    bullet = "- " if markdown else "  * "
    all_notes = [*notes, *service_notes]
    if all_notes:
        parts.append("\n".join(bullet + n for n in all_notes))
    return "\n\n".join(parts)
