"""The soak's bookkeeping: which kill point each trial uses, and the tally by kill point.

A soak is many demo trials in a row: each trial runs its own refund runs in a worker process
that SIGKILLs itself at one kill point (the hit picked by the trial's seed), Redis is wiped, a
brand-new process resumes the runs, and the sandbox provider's own effect list is the judge.
Everything here is pure; :mod:`agentledger.demo.soak_runner` does the I/O.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agentledger._core.killswitch import KILL_POINTS, RESUME_ONLY, WITH_NEXT_COMMIT_ONLY
from agentledger.demo.plan import Report

#: CLI names of the SDK kill points, in the order ``--kill-at all`` cycles through them.
SOAK_POINTS: dict[str, str] = {
    point.replace("_", "-"): point
    for point in KILL_POINTS
    if point not in WITH_NEXT_COMMIT_ONLY | RESUME_ONLY
}
ALL = "all"


@dataclass(frozen=True)
class TrialPlan:
    """One trial: its number, kill point (CLI name), seed and run ids."""

    index: int
    point: str
    seed: int
    run_ids: tuple[str, ...]


def plan_trials(
    trials: int, kill_at: str, seed: int, *, runs_per_trial: int, prefix: str
) -> list[TrialPlan]:
    """``trials`` trials; ``all`` cycles through every kill point, seeds derive from ``seed``."""
    if trials < 1:
        msg = f"--trials must be at least 1, got {trials}"
        raise ValueError(msg)
    if runs_per_trial < 1:
        msg = f"--runs-per-trial must be at least 1, got {runs_per_trial}"
        raise ValueError(msg)
    if kill_at != ALL and kill_at not in SOAK_POINTS:
        msg = f"--kill-at {kill_at!r}: use {ALL} or one of {', '.join(SOAK_POINTS)}"
        raise ValueError(msg)
    points = list(SOAK_POINTS) if kill_at == ALL else [kill_at]
    rng = random.Random(f"soak:{seed}")
    plans = []
    for index in range(trials):
        ids = tuple(f"{prefix}-t{index:05d}-{n}" for n in range(runs_per_trial))
        plans.append(TrialPlan(index, points[index % len(points)], rng.randrange(2**31), ids))
    return plans


def pick_hit(plan: TrialPlan, hits: int) -> int:
    """The 1-based hit of the trial's kill point to SIGKILL at, among ``hits`` (seeded)."""
    if hits < 1:
        msg = f"trial {plan.index}: no run reaches kill point {plan.point!r}"
        raise ValueError(msg)
    return 1 + random.Random(f"hit:{plan.point}:{plan.seed}").randrange(hits)


@dataclass(frozen=True)
class TrialOutcome:
    """What one trial ended with, judged by the provider's effect list."""

    index: int
    point: str
    seed: int
    hit: int
    of: int
    killed: bool
    duplicates: int
    lost: int
    unexpected: int
    cost_differs: bool
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when the worker died at its point and every effect happened exactly once."""
        return self.killed and not (
            self.duplicates or self.lost or self.unexpected or self.cost_differs or self.problems
        )


def judge(
    plan: TrialPlan, report: Report, *, hit: int, of: int, exit_code: int, killed_code: int
) -> TrialOutcome:
    """A trial's outcome from its worker's exit code and the demo's verification report."""
    cost_differs = (report.tokens, report.usd) != (report.expected_tokens, report.expected_usd)
    problems = list(report.mismatches)
    killed = exit_code == killed_code
    if not killed:
        problems.append(f"the worker was not killed at {plan.point} hit {hit} (exit {exit_code})")
    return TrialOutcome(
        index=plan.index,
        point=plan.point,
        seed=plan.seed,
        hit=hit,
        of=of,
        killed=killed,
        duplicates=report.duplicates,
        lost=report.lost,
        unexpected=report.unexpected,
        cost_differs=cost_differs,
        problems=tuple(problems),
    )


@dataclass
class PointTally:
    """The soak's figures for one kill point (or for all of them)."""

    trials: int = 0
    failed: int = 0
    duplicates: int = 0
    lost: int = 0
    unexpected: int = 0
    cost_differences: int = 0

    def add(self, outcome: TrialOutcome) -> None:
        """Count one trial."""
        self.trials += 1
        self.failed += not outcome.ok
        self.duplicates += outcome.duplicates
        self.lost += outcome.lost
        self.unexpected += outcome.unexpected
        self.cost_differences += outcome.cost_differs


@dataclass
class SoakReport:
    """Every trial's outcome, tallied by kill point; ``ok`` is False on any failed trial."""

    outcomes: list[TrialOutcome] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when there was at least one trial and none failed."""
        return bool(self.outcomes) and all(o.ok for o in self.outcomes)

    def by_point(self) -> dict[str, PointTally]:
        """The tally per kill point, in the order of :data:`SOAK_POINTS`."""
        tallies: dict[str, PointTally] = {}
        for point in SOAK_POINTS:
            for outcome in self.outcomes:
                if outcome.point == point:
                    tallies.setdefault(point, PointTally()).add(outcome)
        return tallies

    def total(self) -> PointTally:
        """The tally over every trial."""
        tally = PointTally()
        for outcome in self.outcomes:
            tally.add(outcome)
        return tally

    def failures(self) -> list[TrialOutcome]:
        """The failed trials, in order."""
        return [o for o in self.outcomes if not o.ok]

    def as_json(self) -> dict[str, Any]:
        """The report as one JSON object."""
        return {
            "ok": self.ok,
            "total": asdict(self.total()),
            "by_point": {p: asdict(t) for p, t in self.by_point().items()},
            "failures": [{**asdict(o), "ok": o.ok} for o in self.failures()],
            "details": self.details,
        }


def progress_bar(done: int, total: int, failed: int, width: int = 30) -> str:
    """``[#####.....]  50/100 trials, 0 failed``."""
    filled = width * done // max(total, 1)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} trials, {failed} failed"


def render_soak(report: SoakReport) -> str:
    """The soak's final table, for people."""
    header = ("kill point", "trials", "failed", "duplicates", "lost", "unexpected", "cost diffs")
    rows: list[Sequence[str]] = [header]
    tallies: Iterable[tuple[str, PointTally]] = [
        *report.by_point().items(),
        ("all", report.total()),
    ]
    for point, t in tallies:
        rows.append(
            (point, *map(str, (t.trials, t.failed, t.duplicates, t.lost, t.unexpected)),
             str(t.cost_differences))
        )  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for name in ("elapsed_s", "seed", "run_prefix", "logs"):
        if name in report.details:
            lines.append(f"{name.replace('_', ' ')}: {report.details[name]}")
    for outcome in report.failures()[:20]:
        lines.append(
            f"  FAILED trial {outcome.index} ({outcome.point}, seed {outcome.seed}, hit "
            f"{outcome.hit}/{outcome.of}): {'; '.join(outcome.problems) or 'see the counts'}"
        )
    lines.append(f"verdict: {'OK' if report.ok else 'FAILED'}")
    return "\n".join(lines)
