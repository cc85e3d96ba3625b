"""Which runs of a fresh namespace a rebuild stores, and with what TTL (views/support.py)."""

from __future__ import annotations

from agentledger.views.store import FreshRun, IndexUpdate
from agentledger.views.support import unexpired

NOW = 1_000_000
DAY = 86_400_000


def _run(run_id: str, status: str, ended_at: int) -> FreshRun:
    return FreshRun(
        run_id=run_id,
        fields={},
        steps={},
        effects={},
        parked=[],
        status=status,
        ended_at=ended_at,
        index=IndexUpdate(run_id=run_id, status=status),
    )


def test_finished_runs_past_retention_are_left_out_and_named() -> None:
    """A finished run whose retention ran out is not yielded and its id lands in ``expired``;
    a finished run inside it gets the TTL left; a running one is kept without a TTL."""
    runs = [
        _run("old", "succeeded", NOW - DAY - 1),
        _run("edge", "failed", NOW - DAY),
        _run("recent", "succeeded", NOW - 10),
        _run("live", "running", 0),
    ]
    expired: set[str] = set()
    kept = [(run.run_id, ttl) for run, ttl in unexpired(runs, DAY, NOW, expired)]
    assert kept == [("recent", DAY - 10), ("live", None)]
    assert expired == {"old", "edge"}


def test_without_a_retention_every_run_is_kept_forever() -> None:
    """No retention: every run is yielded with no TTL and nothing is expired."""
    runs = [_run("a", "succeeded", 0), _run("b", "running", 0)]
    expired: set[str] = set()
    assert [(r.run_id, t) for r, t in unexpired(runs, None, NOW, expired)] == [
        ("a", None),
        ("b", None),
    ]
    assert expired == set()
