"""PNG plots of a bench report (matplotlib, no display): bytes vs steps, latency percentiles,
throughput."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a display
import matplotlib.pyplot as plt

from bench.harness import percentile
from bench.report import figures_of

PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def _measured(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [r for r in report["peers"] if r.get("status") == "ok"]


def _title(report: Mapping[str, Any], what: str) -> str:
    meta = report["meta"]
    m = meta["machine"]
    commit = (meta.get("commit") or "")[:8]
    return f"{what}\n{m['cores']} cores, {m['cpu'][:40]} · commit {commit}"


def bytes_plot(report: Mapping[str, Any], path: Path) -> Path:
    """Bytes stored vs steps, log-log; projected points are hollow and dashed."""
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for r in _measured(report):
        pts = sorted((int(k), float(v)) for k, v in r.get("bytes", {}).items())
        if not pts:
            continue
        (line,) = ax.plot([p[0] for p in pts], [max(p[1], 1.0) for p in pts], "o-", label=r["peer"])
        proj = sorted((int(k), float(v)) for k, v in r.get("bytes_projected", {}).items())
        if proj:
            xs = [pts[-1][0]] + [p[0] for p in proj]
            ys = [pts[-1][1]] + [p[1] for p in proj]
            ax.plot(xs, ys, "--", color=line.get_color())
            ax.plot(
                [p[0] for p in proj], [p[1] for p in proj], "o", mfc="none", color=line.get_color()
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("steps in the run")
    ax.set_ylabel("bytes stored (hollow = projected, not run)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(
        _title(report, "Bytes stored vs steps (1 KB message + 1 effect per step)"), fontsize=10
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def latency_percentiles(samples: Sequence[float]) -> list[float]:
    """p50/p90/p99/p99.9 of the samples in milliseconds."""
    return [percentile(samples, q) * 1000.0 for q in PERCENTILES]


def latency_plot(report: Mapping[str, Any], path: Path) -> Path:
    """Grouped bars of step-latency percentiles over all latency runs of each peer (log y)."""
    peers = [r for r in _measured(report) if r.get("latency_runs")]
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(peers) + 3), 5.5))
    width = 0.8 / len(PERCENTILES)
    for i, q in enumerate(PERCENTILES):
        values = []
        for r in peers:
            pooled = [x for run in r["latency_runs"] for x in run["latencies"]]
            values.append(percentile(pooled, q) * 1000.0)
        xs = [n + (i - (len(PERCENTILES) - 1) / 2) * width for n in range(len(peers))]
        ax.bar(xs, values, width, label=f"p{q:g}")
    ax.set_xticks(range(len(peers)))
    ax.set_xticklabels([r["peer"] for r in peers], rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("per-step checkpoint latency, ms (log)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(_title(report, "Per-step latency percentiles (single run)"), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def throughput_plot(report: Mapping[str, Any], path: Path) -> Path:
    """Steps/s of one run and of 200 concurrent runs, medians with min-max whiskers."""
    peers = _measured(report)
    figs = [figures_of(r) for r in peers]
    fig, ax = plt.subplots(figsize=(max(8.0, 1.1 * len(peers) + 3), 5.5))
    for i, (key, label) in enumerate(
        (("steps_per_s_1run", "1 run"), ("steps_per_s_many", "200 concurrent runs"))
    ):
        xs, ys, lo, hi = [], [], [], []
        for n, f in enumerate(figs):
            if key in f:
                s = f[key]
                xs.append(n + (i - 0.5) * 0.4)
                ys.append(s.median)
                lo.append(s.median - s.low)
                hi.append(s.high - s.median)
        ax.bar(xs, ys, 0.4, yerr=[lo, hi], capsize=3, label=label)
    ax.set_xticks(range(len(peers)))
    ax.set_xticklabels([r["peer"] for r in peers], rotation=30, ha="right", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("steps per second (log)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(_title(report, "Throughput"), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(report: Mapping[str, Any], directory: Path) -> list[Path]:
    """All plots of ``report`` as PNG files in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    return [
        bytes_plot(report, directory / "bytes_vs_steps.png"),
        latency_plot(report, directory / "latency_percentiles.png"),
        throughput_plot(report, directory / "throughput.png"),
    ]
