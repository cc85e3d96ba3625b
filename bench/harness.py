"""Pure statistics of the bench: percentiles, median of repeats with min-max, ratio tables."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Better = Literal["lower", "higher"]


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between closest ranks (numpy's
    default), so p50 of an even-sized sample is the mean of the two middle values."""
    if not samples:
        msg = "percentile of an empty sample"
        raise ValueError(msg)
    if not 0.0 <= q <= 100.0:
        msg = f"percentile must be within 0..100, got {q}"
        raise ValueError(msg)
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Spread:
    """The median of repeated measurements of one figure, with their min and max."""

    median: float
    low: float
    high: float
    n: int

    def to_json(self) -> dict[str, float | int]:
        """A JSON-ready dict."""
        return {"median": self.median, "min": self.low, "max": self.high, "n": self.n}

    @classmethod
    def from_json(cls, data: Mapping[str, float | int]) -> Spread:
        """The inverse of :meth:`to_json`."""
        return cls(float(data["median"]), float(data["min"]), float(data["max"]), int(data["n"]))


def spread(values: Iterable[float]) -> Spread:
    """Median, min and max of the repeats of one figure."""
    vals = list(values)
    if not vals:
        msg = "spread of no measurements"
        raise ValueError(msg)
    return Spread(percentile(vals, 50.0), min(vals), max(vals), len(vals))


@dataclass(frozen=True)
class LatencyRun:
    """The per-step latencies (seconds) of one run and how long the run took in all."""

    latencies: Sequence[float]
    elapsed: float

    @property
    def p50_ms(self) -> float:
        """Median step latency in milliseconds."""
        return percentile(self.latencies, 50.0) * 1000.0

    @property
    def p99_ms(self) -> float:
        """99th-percentile step latency in milliseconds."""
        return percentile(self.latencies, 99.0) * 1000.0

    @property
    def steps_per_s(self) -> float:
        """Steps per second over the whole run."""
        return len(self.latencies) / self.elapsed


def latency_figures(runs: Sequence[LatencyRun]) -> dict[str, Spread]:
    """p50, p99 and single-run steps/s, each as a spread over the repeated runs."""
    return {
        "step_p50_ms": spread(r.p50_ms for r in runs),
        "step_p99_ms": spread(r.p99_ms for r in runs),
        "steps_per_s_1run": spread(r.steps_per_s for r in runs),
    }


@dataclass(frozen=True)
class Metric:
    """A figure the bench reports: its key, how it is shown, and which direction is better."""

    key: str
    label: str
    unit: str
    better: Better


def ratio(ours: float, theirs: float) -> float | None:
    """ours / theirs, or None when the peer's figure is zero (no meaningful ratio)."""
    if theirs == 0.0:
        return None
    return ours / theirs


def verdict(r: float | None, better: Better) -> str:
    """Words for a ratio: ``2.0x better`` / ``1.3x worse`` / ``same`` (within 5 %)."""
    if r is None or r <= 0.0:
        return "n/a"
    if 0.95 <= r <= 1.05:
        return "same"
    good = r < 1.0 if better == "lower" else r > 1.0
    factor = 1.0 / r if r < 1.0 else r
    return f"{factor:.1f}x {'better' if good else 'worse'}"


def format_value(value: float, unit: str) -> str:
    """A number with a sensible precision and its unit (bytes shown as KB/MB/GB)."""
    if unit == "B":
        size = value
        for suffix in ("B", "KB", "MB", "GB", "TB"):
            if abs(size) < 1000.0 or suffix == "TB":
                return f"{size:.3g} {suffix}" if suffix != "B" else f"{size:.0f} B"
            size /= 1000.0
    if abs(value) >= 100.0:
        text = f"{value:,.0f}"
    elif abs(value) >= 10.0:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".rstrip()


def format_spread(s: Spread, unit: str) -> str:
    """``median (min-max)`` or just the value when there was one measurement."""
    if s.n == 1 or s.low == s.high:
        return format_value(s.median, unit)
    low = format_value(s.low, unit).removesuffix(f" {unit}")
    high = format_value(s.high, unit).removesuffix(f" {unit}")
    return f"{format_value(s.median, unit)} ({low}-{high})"


Table = list[list[str]]


def figure_table(
    metrics: Sequence[Metric],
    peers: Sequence[str],
    figures: Mapping[str, Mapping[str, Spread]],
) -> Table:
    """Rows = metrics, columns = peers; a missing figure is shown as ``-``."""
    rows: Table = [["figure", *peers]]
    for m in metrics:
        if not any(m.key in figures.get(p, {}) for p in peers):
            continue
        row = [m.label]
        for p in peers:
            s = figures.get(p, {}).get(m.key)
            row.append(format_spread(s, m.unit) if s is not None else "-")
        rows.append(row)
    return rows


def ratio_table(
    metrics: Sequence[Metric],
    ours: str,
    peers: Sequence[str],
    figures: Mapping[str, Mapping[str, Spread]],
) -> Table:
    """Rows = metrics, columns = peers; each cell is ours/peer of the medians, with a verdict."""
    rows: Table = [["figure (ours / peer)", *peers]]
    mine = figures.get(ours, {})
    for m in metrics:
        if m.key not in mine or not any(m.key in figures.get(p, {}) for p in peers):
            continue
        row = [m.label]
        for p in peers:
            theirs = figures.get(p, {}).get(m.key)
            if theirs is None:
                row.append("-")
                continue
            r = ratio(mine[m.key].median, theirs.median)
            row.append("-" if r is None else f"{r:.2f} ({verdict(r, m.better)})")
        rows.append(row)
    return rows


def render_text(table: Table) -> str:
    """A fixed-width text table for the terminal."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = []
    for n, row in enumerate(table):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_markdown(table: Table) -> str:
    """A GitHub-flavoured markdown table."""
    head, *body = table
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|",
    ]
    lines.extend("| " + " | ".join(row) + " |" for row in body)
    return "\n".join(lines)


def growth_exponent(points: Mapping[int, float]) -> float | None:
    """The exponent k of bytes ~ steps^k fitted between the smallest and largest step count
    (≈1 for deltas, ≈2 for full snapshots); None with fewer than two positive points."""
    usable = sorted((n, b) for n, b in points.items() if n > 0 and b > 0)
    if len(usable) < 2:
        return None
    (n0, b0), (n1, b1) = usable[0], usable[-1]
    return math.log(b1 / b0) / math.log(n1 / n0)
