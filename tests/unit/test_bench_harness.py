"""The bench's statistics and tables are pure: percentiles, spreads, ratios, growth."""

from __future__ import annotations

import pytest
from bench.harness import (
    LatencyRun,
    Metric,
    Spread,
    figure_table,
    format_spread,
    format_value,
    growth_exponent,
    latency_figures,
    percentile,
    ratio,
    ratio_table,
    render_markdown,
    render_text,
    spread,
    verdict,
)


def test_percentile_interpolates_between_closest_ranks() -> None:
    """p50 of an even sample is the mean of the middle two; p99 interpolates like numpy."""
    samples = [4.0, 1.0, 3.0, 2.0]
    assert percentile(samples, 50) == 2.5
    assert percentile(samples, 0) == 1.0
    assert percentile(samples, 100) == 4.0
    hundred = [float(i) for i in range(1, 101)]
    assert percentile(hundred, 99) == pytest.approx(99.01)


def test_percentile_rejects_empty_samples_and_bad_quantiles() -> None:
    """An empty sample or a quantile outside 0..100 is an error, not a number."""
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0], 101)


def test_spread_is_median_with_min_and_max() -> None:
    """Repeated measurements become their median, min, max and count."""
    s = spread([3.0, 1.0, 10.0])
    assert s == Spread(median=3.0, low=1.0, high=10.0, n=3)
    assert Spread.from_json(s.to_json()) == s
    with pytest.raises(ValueError, match="no measurements"):
        spread([])


def test_latency_figures_take_the_median_of_each_runs_percentiles() -> None:
    """p50/p99 are computed per run (ms) and then summarised across runs; steps/s per run."""
    runs = [
        LatencyRun([0.001] * 99 + [0.1], elapsed=0.2),
        LatencyRun([0.002] * 100, elapsed=0.2),
        LatencyRun([0.003] * 100, elapsed=0.5),
    ]
    figs = latency_figures(runs)
    assert figs["step_p50_ms"].median == pytest.approx(2.0)
    assert figs["step_p50_ms"].low == pytest.approx(1.0)
    assert figs["step_p99_ms"].low == pytest.approx(1.0 + 0.01 * 99.0)  # one 100 ms outlier
    assert figs["step_p99_ms"].high == pytest.approx(3.0)
    assert figs["steps_per_s_1run"] == Spread(500.0, 200.0, 500.0, 3)


def test_ratio_and_verdict_respect_the_direction_of_better() -> None:
    """Half the latency is 2x better, half the throughput is 2x worse, within 5 % is the same."""
    assert ratio(1.0, 2.0) == 0.5
    assert ratio(1.0, 0.0) is None
    assert verdict(0.5, "lower") == "2.0x better"
    assert verdict(0.5, "higher") == "2.0x worse"
    assert verdict(3.0, "higher") == "3.0x better"
    assert verdict(1.04, "lower") == "same"
    assert verdict(None, "lower") == "n/a"


def test_format_value_scales_bytes_and_rounds_numbers() -> None:
    """Bytes are shown in decimal units; other values with a precision that fits their size."""
    assert format_value(512, "B") == "512 B"
    assert format_value(1_500_000, "B") == "1.5 MB"
    assert format_value(563_000_000, "B") == "563 MB"
    assert format_value(3.14159, "ms") == "3.14 ms"
    assert format_value(12.345, "ms") == "12.3 ms"
    assert format_value(1234.5, "/s") == "1,234 /s"


def test_format_spread_shows_the_range_only_when_there_is_one() -> None:
    """One measurement prints as a value; repeats print as median (min-max)."""
    assert format_spread(Spread(2.0, 2.0, 2.0, 1), "ms") == "2.00 ms"
    assert format_spread(Spread(2.0, 1.5, 3.0, 3), "ms") == "2.00 ms (1.50-3.00)"


METRICS = (
    Metric("lat", "latency", "ms", "lower"),
    Metric("tput", "throughput", "/s", "higher"),
    Metric("never", "never measured", "ms", "lower"),
)


def test_figure_table_has_a_row_per_measured_metric_and_dashes_for_gaps() -> None:
    """Metrics nobody measured are left out; a peer without a figure shows a dash."""
    figures = {
        "ours": {"lat": Spread(1.0, 1.0, 1.0, 1), "tput": Spread(100.0, 100.0, 100.0, 1)},
        "peer": {"lat": Spread(4.0, 4.0, 4.0, 1)},
    }
    table = figure_table(METRICS, ["ours", "peer"], figures)
    assert table[0] == ["figure", "ours", "peer"]
    assert [row[0] for row in table[1:]] == ["latency", "throughput"]
    assert table[2][2] == "-"


def test_ratio_table_divides_ours_by_each_peer() -> None:
    """Each cell is ours/peer of the medians with its verdict."""
    figures = {
        "ours": {"lat": Spread(1.0, 1.0, 1.0, 1), "tput": Spread(100.0, 100.0, 100.0, 1)},
        "peer": {"lat": Spread(4.0, 4.0, 4.0, 1), "tput": Spread(400.0, 400.0, 400.0, 1)},
    }
    table = ratio_table(METRICS, "ours", ["peer"], figures)
    assert table[1] == ["latency", "0.25 (4.0x better)"]
    assert table[2] == ["throughput", "0.25 (4.0x worse)"]


def test_tables_render_as_text_and_markdown() -> None:
    """Text tables align columns under a rule; markdown tables right-align the numbers."""
    table = [["figure", "a"], ["latency", "1.00 ms"]]
    text = render_text(table)
    assert text.splitlines()[1].startswith("-------")
    md = render_markdown(table)
    assert md.splitlines()[1] == "|---|---:|"
    assert md.splitlines()[2] == "| latency | 1.00 ms |"


def test_growth_exponent_tells_deltas_from_snapshots() -> None:
    """Bytes growing with steps give exponent 1, with steps squared exponent 2."""
    assert growth_exponent({100: 1e5, 1000: 1e6, 10_000: 1e7}) == pytest.approx(1.0)
    assert growth_exponent({100: 5e6, 1000: 5e8}) == pytest.approx(2.0)
    assert growth_exponent({1000: 5e8}) is None
    assert growth_exponent({0: 0.0, 100: 1.0}) is None
    assert growth_exponent({100: 2.0, 1000: 2.0}) == pytest.approx(0.0)
