"""The soak's pure parts: trial plans, kill hits, judging one trial, the tally and its table."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from agentledger.demo.plan import Reference, Report
from agentledger.demo.soak import (
    SOAK_POINTS,
    SoakReport,
    TrialOutcome,
    judge,
    pick_hit,
    plan_trials,
    progress_bar,
    render_soak,
)
from agentledger.demo.soak_runner import KilledTrial, keep_failed_logs

KILLED = -signal.SIGKILL


def outcome(index: int, point: str, **bad: int) -> TrialOutcome:
    """A trial outcome, clean unless ``bad`` sets a count."""
    fields = {"duplicates": 0, "lost": 0, "unexpected": 0, **bad}
    return TrialOutcome(
        index=index, point=point, seed=index, hit=1, of=3, killed=True, cost_differs=False,
        **fields,
    )  # fmt: skip


def test_all_cycles_through_every_kill_point() -> None:
    """`--kill-at all` gives the SDK's five kill points in turn, each trial its own runs."""
    plans = plan_trials(12, "all", 7, runs_per_trial=2, prefix="soak-x")
    assert [p.point for p in plans[:5]] == list(SOAK_POINTS)
    assert plans[5].point == plans[0].point
    assert len({r for p in plans for r in p.run_ids}) == 24
    assert plans == plan_trials(12, "all", 7, runs_per_trial=2, prefix="soak-x")  # seeded


def test_one_point_and_bad_arguments() -> None:
    """A named point is used by every trial; zero trials or an unknown point are refused."""
    assert {p.point for p in plan_trials(4, "step", 1, runs_per_trial=1, prefix="s")} == {"step"}
    with pytest.raises(ValueError, match="trials"):
        plan_trials(0, "all", 1, runs_per_trial=1, prefix="s")
    with pytest.raises(ValueError, match="kill-at"):
        plan_trials(1, "nowhere", 1, runs_per_trial=1, prefix="s")


def test_the_hit_is_within_the_reached_hits() -> None:
    """The seeded hit lies in 1..hits, and a point never reached is an error."""
    plans = plan_trials(50, "all", 3, runs_per_trial=1, prefix="s")
    assert all(1 <= pick_hit(p, 4) <= 4 for p in plans)
    assert len({pick_hit(p, 1000) for p in plans}) > 1
    with pytest.raises(ValueError, match="no run reaches"):
        pick_hit(plans[0], 0)


def test_a_duplicate_a_loss_a_cost_difference_or_a_missed_kill_fails_the_trial() -> None:
    """Any duplicate, loss, cost difference or worker that did not die fails its trial."""
    plan = plan_trials(1, "step", 1, runs_per_trial=1, prefix="s")[0]
    clean = Report(tokens=10, usd=0.1, expected_tokens=10, expected_usd=0.1)
    assert judge(plan, clean, hit=1, of=2, exit_code=KILLED, killed_code=KILLED).ok
    assert not judge(plan, clean, hit=1, of=2, exit_code=0, killed_code=KILLED).ok
    for bad in (
        Report(duplicates=1),
        Report(lost=1),
        Report(tokens=11, expected_tokens=10),
        Report(mismatches=["run: status"]),
    ):
        assert not judge(plan, bad, hit=1, of=2, exit_code=KILLED, killed_code=KILLED).ok


def test_the_tally_and_the_table_count_failures_by_kill_point() -> None:
    """The table has a row per kill point and a total; one bad trial makes the soak fail."""
    report = SoakReport(outcomes=[outcome(0, "step"), outcome(1, "after-checkpoint", lost=2)])
    assert not report.ok
    tallies = report.by_point()
    assert (tallies["step"].trials, tallies["step"].failed) == (1, 0)
    assert (tallies["after-checkpoint"].failed, tallies["after-checkpoint"].lost) == (1, 2)
    assert report.total().trials == 2
    table = render_soak(report)
    assert "FAILED trial 1 (after-checkpoint" in table
    assert table.endswith("verdict: FAILED")
    assert render_soak(SoakReport(outcomes=[outcome(0, "step")])).endswith("verdict: OK")
    assert not SoakReport().ok  # no trial proves nothing


def test_progress_bar() -> None:
    """The bar fills with the trials done and says how many failed."""
    assert progress_bar(5, 10, 1, width=10) == "[#####.....] 5/10 trials, 1 failed"


def test_only_failed_trials_keep_their_logs(tmp_path: Path) -> None:
    """A passed trial's logs are deleted; a failed one's and its batch's resume log are kept."""
    plans = plan_trials(2, "step", 1, runs_per_trial=1, prefix="s")
    killed = []
    for plan in plans:
        log = tmp_path / f"trial-{plan.index}.kill.log"
        log.write_text("log")
        killed.append(KilledTrial(plan, Reference({}, {}), 1, 1, KILLED, log))
    resume = tmp_path / "batch.resume.log"
    resume.write_text("resume")
    keep_failed_logs(killed, [outcome(0, "step"), outcome(1, "step", duplicates=1)], resume)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch.resume.log", "trial-1.kill.log"]
    keep_failed_logs(killed[:1], [outcome(0, "step")], resume)
    assert not resume.exists()
