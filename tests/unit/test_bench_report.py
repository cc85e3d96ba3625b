"""The bench turns raw samples into figures, and reads other components' bench reports."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
from bench.readme import machine_line, section
from bench.report import figures_of, projected_of, render
from bench.services import ServiceBench, dig, summarize
from bench.workload import MESSAGE_BYTES, Params, effect_key, message

RAW = {
    "peer": "ours",
    "status": "ok",
    "errors": {"resume": "no state"},
    "notes": ["acks=all"],
    "latency_runs": [
        {"latencies": [0.001, 0.002, 0.003], "elapsed": 0.01},
        {"latencies": [0.002, 0.002, 0.004], "elapsed": 0.02},
    ],
    "concurrent_runs": [{"runs": 200, "steps": 2, "elapsed": 2.0}],
    "bytes": {"100": 1000, "1000": 10_000},
    "bytes_projected": {"10000": 100_000.0},
    "bytes_projected_reason": "not run",
    "resume": [{"resume_s": 0.5, "process_s": 2.0}, {"resume_s": 0.7, "process_s": 2.5}],
}


def test_figures_of_derives_every_figure_from_the_raw_samples() -> None:
    """Latency, throughput, bytes and resume figures come out in the report's units."""
    figs = figures_of(RAW)
    assert figs["step_p50_ms"].median == pytest.approx(2.0)
    assert figs["steps_per_s_1run"].low == pytest.approx(150.0)
    assert figs["steps_per_s_many"].median == pytest.approx(200.0)
    assert figs["bytes_1000"].median == 10_000
    assert "bytes_10000" not in figs
    assert figs["resume_ms"].median == pytest.approx(600.0)
    assert projected_of(RAW) == {"bytes_10000": 100_000.0}


def test_cpu_and_open_figures_come_from_process_time_and_open_samples() -> None:
    """CPU µs per step divides the process CPU of a run by its steps; opening is a p50 figure."""
    raw = {
        **RAW,
        "latency_runs": [{"latencies": [0.001] * 4, "elapsed": 0.01, "cpu_s": 0.002}],
        "concurrent_runs": [{"runs": 200, "steps": 2, "elapsed": 2.0, "cpu_s": 0.1}],
        "open_s": [0.004, 0.002, 0.010],
    }
    figs = figures_of(raw)
    assert figs["cpu_us_step_1run"].median == pytest.approx(500.0)
    assert figs["cpu_us_step_many"].median == pytest.approx(250.0)
    assert figs["open_p50_ms"].median == pytest.approx(4.0)
    assert "cpu_us_step_1run" not in figures_of(RAW)
    assert "opening a new run p50" in render([raw], {}, [], "ours")


def test_render_lists_unmeasured_peers_with_their_reason() -> None:
    """A peer that could not run appears in the notes with why, never silently dropped."""
    down = {"peer": "redis-saver", "status": "unavailable", "reason": "needs RediSearch"}
    text = render([RAW, down], {}, [], "ours")
    assert "redis-saver: NOT MEASURED — needs RediSearch" in text
    assert "ours: resume not measured — no state" in text
    assert "ours: bytes grow as steps^1.00" in text


def test_dig_reads_numbers_only() -> None:
    """A path into a nested report yields its number, or None when absent or not numeric."""
    report = {"a": {"b": 3, "c": "x", "d": True}}
    assert dig(report, ("a", "b")) == 3.0
    assert dig(report, ("a", "c")) is None
    assert dig(report, ("a", "d")) is None
    assert dig(report, ("z",)) is None


def test_summarize_reports_figures_and_their_floor() -> None:
    """A service figure is the spread over repeats, quoted next to the floor it measured."""
    bench = ServiceBench(
        module="bench.x",
        quick_args=(),
        full_args=(),
        figures={"reconciler_intents_s": ("rate",), "missing": ("nope",)},
        floors={"reconciler_intents_s": (("bare lookups", ("floor",)),)},
    )
    figs, notes = summarize(bench, [{"rate": 40, "floor": 200}, {"rate": 60, "floor": 200}])
    assert figs["reconciler_intents_s"].median == 50.0
    assert any("0.25x" in n and "bare lookups" in n for n in notes)
    assert any("missing" in n for n in notes)


def test_workload_messages_are_deterministic_one_kilobyte_and_distinct() -> None:
    """Each step's message is 1 KB, the same for the same (run, step), different otherwise."""
    a = message("run", 1)
    assert len(a) == MESSAGE_BYTES
    assert a == message("run", 1)
    assert a != message("run", 2)
    assert effect_key("run", 1) == effect_key("run", 1) != effect_key("run", 2)


def test_readme_section_names_the_machine_command_and_commit() -> None:
    """The README text of a saved report says where, with what and from which commit it ran."""
    report = {
        "meta": {
            "machine": {
                "cores": 2,
                "cpu": "AMD EPYC",
                "memory_gib": 23.5,
                "kernel": "6.1",
                "python": "3.11.7",
            },
            "versions": {
                "kafka": "4.1.1",
                "redis-server": "7.0.15",
                "postgresql": "15",
                "langgraph": "1.2",
                "dbos": "3.2",
            },
            "commit": "0123456789abcdef",
            "tree_dirty": False,
            "command": "python -m bench --json out.json",
            "seconds": 600.0,
            "load_avg_1_5_15_at_start": [1.0, 1.0, 1.0],
            "load_avg_1_5_15_at_end": [2.0, 1.0, 1.0],
        },
        "peers": [RAW],
        "services": {"reconciler_intents_s": {"median": 30.0, "min": 29.0, "max": 31.0, "n": 2}},
        "service_notes": ["floor note"],
    }
    line = machine_line(report)
    assert "`0123456789ab`" in line
    assert "`python -m bench --json out.json` took 10 min" in line
    text = section(report)
    assert "| reconciler intents/s | 30.0 /s (29.0-31.0) |" in text
    assert "- floor note" in text


def test_params_survive_the_json_trip_to_a_child_process() -> None:
    """The measuring child gets exactly the sizes the parent chose, marks as a tuple."""
    params = Params.full()
    assert Params.from_json(json.loads(json.dumps(asdict(params)))) == params
