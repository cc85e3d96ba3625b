"""Issue 17 finding 2: `views verify` (compare) sees the damage a wipe during catch-up left:
a live run behind the log (running at an older seq while the log says succeeded) and views
that exist only in the live namespace."""

from __future__ import annotations

from agentledger.projector.rebuild import compare
from agentledger.views import RunView, fold
from agentledger.views.store import RunWrite
from tests.unit.test_fold_into_store import World, live, run_events


async def test_verify_reports_a_live_run_behind_the_log_and_keys_only_in_live() -> None:
    """A live view put back to an earlier seq is a difference (not a run that moved on), and a
    run the log never had is reported as only in live."""
    world = World()
    events = run_events("r1", steps=2)
    live_projector = world.projector()
    await live_projector.process(world.write(events))
    ns = await live(world)
    scratch = await world.store.create_namespace()
    await world.projector(namespace=scratch).replay(
        {tp: (0, end) for tp, end in live_projector.positions.items()}
    )
    clean = compare(await world.store.snapshot(ns), await world.store.snapshot(scratch))
    assert clean.differences == []
    current = (await world.store.load_runs(ns, ["r1"]))["r1"]
    behind = fold(RunView(run_id="r1"), events[:4]).view
    assert behind.status == "running"
    ghost = fold(RunView(run_id="ghost"), run_events("ghost", steps=1)).view
    await world.store.write_runs(
        ns,
        [
            RunWrite(run_id="r1", expected=current.token, view=behind),
            RunWrite(run_id="ghost", expected=None, view=ghost),
        ],
    )
    result = compare(await world.store.snapshot(ns), await world.store.snapshot(scratch))
    assert result.moved_on == []
    assert "{r1}:run [status]: live=running rebuilt=succeeded" in result.differences
    assert any(d.startswith("only in live: ") and "ghost" in d for d in result.differences)
