"""``python -m bench.readme REPORT.json [--plots DIR]``: the README's results tables, in markdown,
from a saved bench report (so the README shows exactly what the bench measured)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.harness import Spread
from bench.peers import OURS
from bench.report import render


def machine_line(report: Mapping[str, Any]) -> str:
    """Machine, load, versions and commit in two sentences."""
    meta = report["meta"]
    m = meta["machine"]
    v = meta["versions"]
    load0 = meta.get("load_avg_1_5_15_at_start", [0.0])[0]
    load1 = meta.get("load_avg_1_5_15_at_end", [0.0])[0]
    dirty = " plus uncommitted changes" if meta.get("tree_dirty") else ""
    return (
        f"Measured on {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, Linux "
        f"{m['kernel']}, Python {m['python']}; load average {load0:.1f} at the start and "
        f"{load1:.1f} at the end (other work was running on the machine). Kafka {v['kafka']} "
        f"(local stack), Redis {v['redis-server']}, PostgreSQL {v['postgresql']}, LangGraph "
        f"{v['langgraph']}, DBOS {v['dbos']}. Commit `{meta['commit'][:12]}`{dirty}; "
        f"`{meta['command']}` took {meta['seconds'] / 60:.0f} min."
    )


def section(report: Mapping[str, Any]) -> str:
    """The tables and notes of a report as markdown."""
    services = {k: Spread.from_json(v) for k, v in report.get("services", {}).items()}
    notes = list(report.get("service_notes", []))
    return render(report["peers"], services, notes, OURS, markdown=True)


def main(argv: list[str] | None = None) -> None:
    """Print the markdown for a saved report."""
    p = argparse.ArgumentParser(prog="python -m bench.readme")
    p.add_argument("report", type=Path)
    a = p.parse_args(argv)
    report = json.loads(a.report.read_text())
    print(machine_line(report))
    print()
    print(section(report))


if __name__ == "__main__":
    main()
