"""The run writer's own fold: the view it keeps is the pure fold of the events it wrote."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core.writer import RunWriter
from agentledger.bus.memory import MemoryEventLog
from agentledger.views import RunView, fold
from tests.unit.test_fold_properties import RUN, _run_events

_ENVELOPE = {"event_id", "run_id", "seq", "fence", "worker_id", "occurred_at"}


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=6), st.data())
def test_the_writers_view_is_the_fold_of_its_events_and_it_keeps_nothing_touched(
    steps: int, data: st.DataObject
) -> None:
    """Appending a run's events gives the view folding them gives (digests included), and the
    writer holds no record of the steps and effects they touched."""
    rejected = data.draw(st.sets(st.integers(min_value=0, max_value=steps - 1)))
    clock = iter(range(1000, 2000))
    writer = RunWriter(
        MemoryEventLog(), RunView(run_id=RUN), fence=1, worker_id="w1", clock=lambda: next(clock)
    )
    for event in _run_events(steps, rejected, None):
        fields = {k: getattr(event, k) for k in type(event).model_fields if k not in _ENVELOPE}
        writer.append(type(event), **fields)
    folded = fold(RunView(run_id=RUN), list(writer.pending))
    assert not folded.parked
    assert writer.view.model_dump() == folded.view.model_dump()
    assert writer.view.recent_digests == folded.view.recent_digests
    assert not writer._touched.touched_steps
    assert not writer._touched.touched_effects


def test_writers_of_runs_written_together_share_one_touched_record_and_fold_their_own() -> None:
    """Writers of several runs appending in turn keep no record of what the fold touched each
    (one for all, emptied after each event), and each view is the fold of its own events."""
    clock = iter(range(1000, 2000))
    writers = {
        run: RunWriter(
            MemoryEventLog(),
            RunView(run_id=run),
            fence=1,
            worker_id="w1",
            clock=lambda: next(clock),
        )
        for run in ("run-a", "run-b", "run-c")
    }
    runs = {run: list(_run_events(3, {1}, None)) for run in writers}
    for index in range(max(len(events) for events in runs.values())):
        for run, events in runs.items():
            if index < len(events):
                event = events[index]
                fields = {
                    k: getattr(event, k) for k in type(event).model_fields if k not in _ENVELOPE
                }
                writers[run].append(type(event), **fields)
    touched = {id(writer._touched) for writer in writers.values()}
    assert len(touched) == 1
    for run, writer in writers.items():
        folded = fold(RunView(run_id=run), list(writer.pending))
        assert writer.view.model_dump() == folded.view.model_dump()
        assert not writer._touched.touched_steps
        assert not writer._touched.touched_effects
