"""How the applier cuts a large batch into slices of whole partitions (DESIGN.md §16)."""

from __future__ import annotations

from agentledger.bus.partitioning import partition_for, run_key
from agentledger.events import RunStarted, StepStarted
from agentledger.events.models import RunEvent
from agentledger.projector.applier import Decoded, partition_slices
from agentledger.projector.ports import Record

PARTS = 4


def decoded(runs: list[str]) -> Decoded:
    """Two events per run, each where a writer puts it (its run's home partition)."""
    out = Decoded()
    for run in runs:
        home = partition_for(run_key(run), PARTS)
        events: list[RunEvent] = [
            RunStarted(run_id=run, seq=1, fence=1, worker_id="w", agent="a", plan=["s"]),
            StepStarted(
                run_id=run, seq=2, fence=1, worker_id="w", step=0, step_name="s", attempt=1
            ),
        ]
        out.runs[run] = events
        for n, event in enumerate(events):
            out.where[event.event_id] = Record("t", home, n, run_key(run), b"")
    return out


def test_slices_keep_each_partition_whole_with_its_progress_and_floor() -> None:
    """Every run lands in the slice of its home partition, each partition in one slice only,
    with that partition's progress and floor; a partition with no run event goes with the last."""
    runs = [f"r{i}" for i in range(20)]
    batch = decoded(runs)
    homes = {run: partition_for(run_key(run), PARTS) for run in runs}
    used = set(homes.values())
    idle = next(p for p in range(PARTS * 4) if p not in used)  # only dead letters there
    progress = {("t", p): 100 + p for p in [*used, idle]}
    floors = {("t", p): 50 + p for p in used}
    slices = partition_slices(batch, progress, floors, size=4)
    assert len(slices) > 1
    seen: set[int] = set()
    for part in slices:
        assert not part.partitions & seen
        seen |= part.partitions
        assert {homes[r] for r in part.runs} == part.partitions
        for run, events in part.runs.items():
            assert events == batch.runs[run]
        assert {tp[1] for tp in part.floors} == part.partitions
    assert seen == used
    assert sum(len(p.runs) for p in slices) == len(runs)
    assert {tp: o for part in slices for tp, o in part.progress.items()} == progress
    assert ("t", idle) in slices[-1].progress
    assert all(sum(len(e) for e in p.runs.values()) >= 4 for p in slices[:-1])


def test_a_batch_of_one_partition_is_one_slice() -> None:
    """Runs of a single partition are never cut, however many events they have."""
    home = partition_for(run_key("r0"), PARTS)
    runs = [r for r in (f"r{i}" for i in range(40)) if partition_for(run_key(r), PARTS) == home]
    slices = partition_slices(decoded(runs), {("t", home): 9}, {}, size=1)
    assert len(slices) == 1
    assert set(slices[0].runs) == set(runs)
    assert slices[0].progress == {("t", home): 9}
