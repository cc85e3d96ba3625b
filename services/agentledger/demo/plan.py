"""The demo's bookkeeping: the uninterrupted reference, where to kill, and what to compare.

The reference is the same agent run to completion on the in-memory ports (same SDK, same
seed): it says what every run must end with (status, result, step results, cost), which
idempotency keys must reach the provider exactly once, and how many times each kill point is
reached, from which the seed picks the hit to SIGKILL at.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from agentledger._core.killswitch import ANY, KillSwitch
from agentledger._core.writer import Checkpoints
from agentledger.demo.agent import refund_agent, spec_for
from agentledger.testing import LedgerEnvironment
from agentledger.views import RunView

#: CLI kill-at names -> SDK kill points (random-step: any kill point of any step).
KILL_AT: dict[str, str] = {
    "random-step": ANY,
    "after-provider-commit": "after_provider_commit",
    "before-checkpoint": "before_checkpoint",
    "mid-activity": "mid_activity",
}


@dataclass(frozen=True)
class Expected:
    """What one run must end with."""

    run_id: str
    status: str
    result_json: str
    steps: dict[int, str]
    tokens: int
    usd: float
    effects: dict[str, str]  # idempotency key -> kind


@dataclass(frozen=True)
class Reference:
    """Every run's expectation and how often each kill point is reached in total."""

    runs: dict[str, Expected]
    hits: dict[str, int]


def run_ids(prefix: str, count: int) -> list[str]:
    """The demo's run ids: ``<prefix>-000`` …"""
    return [f"{prefix}-{i:03d}" for i in range(count)]


def expected_of(view: RunView) -> Expected:
    """The parts of a finished run's view that a resumed run must reproduce."""
    return Expected(
        run_id=view.run_id,
        status=view.status,
        result_json=view.result_json,
        steps={i: s.result_json for i, s in sorted(view.steps.items())},
        tokens=view.budget.tokens,
        usd=round(view.budget.usd, 9),
        effects={k: e.kind for k, e in view.effects.items()},
    )


async def reference(
    ids: Sequence[str], seed: int, *, checkpoints: Checkpoints = "each_step"
) -> Reference:
    """Run every run uninterrupted on the in-memory ports and record what it did."""
    switch = KillSwitch()
    runs: dict[str, Expected] = {}
    async with LedgerEnvironment() as env:
        ledger = env.ledger(kill_switch=switch, checkpoints=checkpoints)
        for run_id in ids:
            async with ledger.run(spec_for(run_id, seed)) as run:
                await refund_agent(run, seed)
            runs[run_id] = expected_of(await env.view(run_id))
    return Reference(runs, dict(switch.counts))


def kill_target(kill_at: str, seed: int, hits: Mapping[str, int]) -> tuple[str, int]:
    """The SDK kill point and the hit (1-based) the seed picks among all runs' hits."""
    point = KILL_AT[kill_at]
    total = hits.get(point, 0)
    if total == 0:
        msg = f"no run reaches kill point {point!r}; nothing to kill at"
        raise ValueError(msg)
    return point, 1 + random.Random(f"kill:{kill_at}:{seed}").randrange(total)


@dataclass(frozen=True)
class Performed:
    """One effect the provider performed (from ``GET /v1/effects``)."""

    key: str
    kind: str
    order_id: str | None


@dataclass
class Report:
    """The demo's outcome; ``ok`` is False on any duplicate, loss or difference."""

    runs: int = 0
    finished: int = 0
    steps: int = 0
    effects_performed: int = 0
    effects_expected: int = 0
    duplicates: int = 0
    lost: int = 0
    unexpected: int = 0
    tokens: int = 0
    usd: float = 0.0
    expected_tokens: int = 0
    expected_usd: float = 0.0
    mismatches: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    verified: bool = True

    @property
    def ok(self) -> bool:
        """True when every effect happened exactly once and every run matches the reference."""
        return not (self.duplicates or self.lost or self.unexpected or self.mismatches)

    def as_json(self) -> dict[str, Any]:
        """The report as one JSON object."""
        return {**asdict(self), "ok": self.ok}


def _compare(expected: Expected, view: RunView | None) -> list[str]:
    if view is None:
        return [f"{expected.run_id}: no events"]
    got = expected_of(view)
    problems = []
    for name in ("status", "result_json", "tokens", "usd"):
        want, have = getattr(expected, name), getattr(got, name)
        if want != have:
            problems.append(f"{expected.run_id}: {name} {have!r} != reference {want!r}")
    for index, result in expected.steps.items():
        if got.steps.get(index) != result:
            problems.append(f"{expected.run_id}: step {index} result differs from the reference")
    return problems


def verify(
    ref: Reference, views: Mapping[str, RunView | None], performed: Iterable[Performed]
) -> Report:
    """Compare the runs' views and the provider's effects with the reference."""
    report = Report(runs=len(ref.runs))
    ours_orders = {f"ord-{run_id}" for run_id in ref.runs}
    expected_keys = {k: kind for e in ref.runs.values() for k, kind in e.effects.items()}
    mine = [p for p in performed if p.key in expected_keys or p.order_id in ours_orders]
    per_key = Counter(p.key for p in mine)
    per_logical = Counter((p.kind, p.order_id) for p in mine)
    report.effects_performed = len(mine)
    report.effects_expected = len(expected_keys)
    report.duplicates = sum(n - 1 for n in per_logical.values() if n > 1)
    report.lost = sum(1 for key in expected_keys if per_key[key] == 0)
    report.unexpected = sum(1 for p in mine if p.key not in expected_keys)
    for run_id, expected in ref.runs.items():
        view = views.get(run_id)
        report.mismatches += _compare(expected, view)
        report.expected_tokens += expected.tokens
        report.expected_usd += expected.usd
        if view is not None:
            report.finished += view.status == "succeeded"
            report.steps += sum(1 for s in view.steps.values() if s.status == "checkpointed")
            report.tokens += view.budget.tokens
            report.usd += view.budget.usd
    report.usd = round(report.usd, 6)
    report.expected_usd = round(report.expected_usd, 6)
    return report


def render(report: Report) -> str:
    """The demo's table, for people."""
    d = report.details
    rows = [
        ("runs", f"{report.runs} ({report.finished} succeeded)"),
        ("steps checkpointed", str(report.steps)),
        ("effects performed", f"{report.effects_performed} (expected {report.effects_expected})"),
        ("duplicates", str(report.duplicates)),
        ("lost", str(report.lost)),
        ("unexpected", str(report.unexpected)),
        (
            "total cost",
            f"{report.tokens} tokens, ${report.usd:.6f} "
            f"(uninterrupted: {report.expected_tokens} tokens, ${report.expected_usd:.6f})",
        ),
    ]
    kill = d.get("kill")
    if isinstance(kill, dict) and kill.get("at"):
        outcome = "SIGKILLed" if kill.get("killed") else f"not killed (exit {kill.get('exit')})"
        rows.append(
            (
                "kill",
                f"{kill['at']}: kill point {kill['point']}, hit {kill['hit']} of {kill['of']}, "
                f"{outcome}",
            )
        )
    for name in ("first_process_s", "flush", "resume_process_s", "total_s"):
        if name in d:
            rows.append((name.replace("_", " "), str(d[name])))
    if not report.verified:
        rows.append(("verdict", "not verified: runs left to the fleet and the reconciler"))
    else:
        rows.append(("verdict", "OK" if report.ok else "FAILED"))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    lines += [f"  mismatch: {m}" for m in report.mismatches[:20]]
    return "\n".join(lines)
