"""The demo's verdict: duplicates, losses and differences from the reference all fail it."""

from __future__ import annotations

import pytest

from agentledger.demo.agent import expected_effects, refund_agent, spec_for
from agentledger.demo.plan import (
    KILL_AT,
    Performed,
    kill_target,
    reference,
    run_ids,
    verify,
)
from agentledger.testing import LedgerEnvironment

IDS = run_ids("p", 3)


async def views_of_real_runs(seed: int) -> dict[str, object]:
    """Views of the same runs done for real (uninterrupted) on another in-memory world."""
    async with LedgerEnvironment() as env:
        for run_id in IDS:
            async with env.ledger().run(spec_for(run_id, seed)) as run:
                await refund_agent(run, seed)
        return {run_id: await env.view(run_id) for run_id in IDS}


async def test_reference_lists_every_effect_and_counts_kill_points() -> None:
    """The reference knows each run's effect kinds and how often each point is reached."""
    ref = await reference(IDS, 5)
    for run_id, expected in ref.runs.items():
        assert sorted(expected.effects.values()) == sorted(expected_effects(5, run_id))
        assert expected.status == "succeeded"
    assert ref.hits["step"] == 15
    assert ref.hits["before_checkpoint"] == 15
    assert ref.hits["mid_activity"] == 6
    assert ref.hits["any"] == sum(v for k, v in ref.hits.items() if k != "any")


@pytest.mark.parametrize("kill_at", sorted(KILL_AT))
def test_kill_target_is_a_reachable_hit_chosen_by_the_seed(kill_at: str) -> None:
    """The hit is in 1..hits of the point and depends only on the seed."""
    hits = {"any": 40, "after_provider_commit": 7, "before_checkpoint": 15, "mid_activity": 6}
    point, hit = kill_target(kill_at, 3, hits)
    assert point == KILL_AT[kill_at]
    assert 1 <= hit <= hits[point]
    assert kill_target(kill_at, 3, hits) == (point, hit)
    assert len({kill_target(kill_at, s, hits)[1] for s in range(40)}) > 1


async def test_identical_runs_pass_and_each_defect_fails() -> None:
    """Exactly-once effects and equal outcomes pass; a duplicate, a loss, a cost change fail."""
    ref = await reference(IDS, 2)
    views = await views_of_real_runs(2)
    good = [
        Performed(key, kind, f"ord-{run_id}")
        for run_id, expected in ref.runs.items()
        for key, kind in expected.effects.items()
    ]
    assert verify(ref, views, good).ok  # type: ignore[arg-type]

    doubled = [*good, Performed("other-key", good[0].kind, good[0].order_id)]
    report = verify(ref, views, doubled)  # type: ignore[arg-type]
    assert report.duplicates == 1
    assert not report.ok

    report = verify(ref, views, good[1:])  # type: ignore[arg-type]
    assert report.lost == 1
    assert not report.ok

    cheaper = dict(views)
    view = cheaper[IDS[0]].model_copy(deep=True)  # type: ignore[attr-defined]
    view.budget.tokens -= 1
    cheaper[IDS[0]] = view
    report = verify(ref, cheaper, good)  # type: ignore[arg-type]
    assert any("tokens" in m for m in report.mismatches)
    assert not report.ok
