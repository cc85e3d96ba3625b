"""The run writer makes its events' digests when its view is read, not at every append."""

from __future__ import annotations

import gc
import importlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core.writer import RunWriter
from agentledger.bus.memory import MemoryEventLog
from agentledger.events import RunEvent
from agentledger.testing import LedgerEnvironment
from agentledger.views import RunView, fold
from agentledger.views.fold import RECENT_DIGESTS
from agentledger.worker import RunSpec, Step
from tests.unit.test_fold_properties import RUN, _run_events

#: the module (its name is shadowed in the package by the function ``fold``)
fold_module = importlib.import_module("agentledger.views.fold")
_ENVELOPE = {"event_id", "run_id", "seq", "fence", "worker_id", "occurred_at"}


def _fields(event: RunEvent) -> dict[str, Any]:
    """The fields a caller passes to ``append`` to write ``event`` again."""
    return {k: getattr(event, k) for k in type(event).model_fields if k not in _ENVELOPE}


def _digests(view: RunView) -> list[tuple[int, str]]:
    """The view's digests in their order."""
    return list(view.recent_digests.items())


@settings(max_examples=80, deadline=None)
@given(
    st.integers(min_value=1, max_value=6),
    st.data(),
)
def test_the_view_read_at_any_point_is_the_fold_of_the_loaded_view_and_the_events_written(
    steps: int, data: st.DataObject
) -> None:
    """Read after any append, from a loaded view with digests of its own, the writer's view is
    the fold of what it wrote, digests and their order included; between reads every other
    field is current."""
    rejected = data.draw(st.sets(st.integers(min_value=0, max_value=steps - 1)))
    events = _run_events(steps, rejected, None)
    loaded_upto = data.draw(st.integers(min_value=0, max_value=len(events) - 1))
    loaded = fold(RunView(run_id=RUN), events[:loaded_upto]).view
    reads = data.draw(st.sets(st.integers(min_value=0, max_value=len(events))))
    writer = RunWriter(
        MemoryEventLog(),
        loaded.model_copy(deep=True),
        fence=1,
        worker_id="w1",
        clock=iter(range(1000, 2000)).__next__,
    )
    for i, event in enumerate(events[loaded_upto:], start=loaded_upto + 1):
        writer.append(type(event), **_fields(event))
        reference = fold(loaded, list(writer.pending)).view
        assert writer.folded.model_dump(exclude={"recent_digests"}) == reference.model_dump(
            exclude={"recent_digests"}
        )
        if i in reads:
            assert writer.view.model_dump() == reference.model_dump()
            assert _digests(writer.view) == _digests(reference)
    reference = fold(loaded, list(writer.pending)).view
    assert writer.view.model_dump() == reference.model_dump()
    assert _digests(writer.view) == _digests(reference)


def test_appending_makes_no_digest_and_a_read_makes_only_the_last_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Appending a long run digests nothing; reading the view then digests only the last
    RECENT_DIGESTS events, and a second read nothing more."""
    made: list[int] = []
    digest = fold_module.event_digest

    def counted(event: RunEvent) -> str:
        made.append(event.seq)
        return digest(event)

    monkeypatch.setattr(fold_module, "event_digest", counted)
    events = _run_events(6, {1, 4}, None)
    assert len(events) > RECENT_DIGESTS
    writer = RunWriter(MemoryEventLog(), RunView(run_id=RUN), fence=1, worker_id="w1")
    for event in events:
        writer.append(type(event), **_fields(event))
        assert writer.folded.applied_seq == event.seq
    assert made == []
    assert sorted(writer.view.recent_digests) == [e.seq for e in events[-RECENT_DIGESTS:]]
    assert made == [e.seq for e in events[-RECENT_DIGESTS:]]
    writer.view  # noqa: B018 - a second read
    assert len(made) == RECENT_DIGESTS


async def test_a_runs_view_handed_out_has_the_digests_of_what_it_wrote() -> None:
    """``Run.view`` read inside a run has the digests folding the run's log gives, after
    steps whose events the SDK folded without them."""

    async def body(step: Step) -> Any:
        await step.activity("llm", _answer)
        return {"n": step.index}

    async with LedgerEnvironment() as env:
        ledger = env.ledger(checkpoints="with_next_commit")
        spec = RunSpec(run_id="r1", agent="t", plan=["a", "b", "c"])
        async with ledger.run(spec) as run:
            for name in ("a", "b"):
                await run.step(name, body)
            await run.sync()
            written = await env.events("r1")
            assert _digests(run.view) == _digests(fold(RunView(run_id="r1"), written).view)
            await run.step("c", body)


async def _answer() -> str:
    """An activity's value."""
    return "ok"


async def test_a_flushed_event_is_not_kept_by_the_writer_and_its_digest_is_still_made() -> None:
    """Once flushed, no event is held by the writer (only its fields, for its digest): the
    view read afterwards still has the fold's digests, in order."""
    writer = RunWriter(
        MemoryEventLog(),
        RunView(run_id=RUN),
        fence=1,
        worker_id="w1",
        clock=iter(range(1000, 2000)).__next__,
    )
    written = []
    for event in _run_events(3, {1}, None):
        written.append(writer.append(type(event), **_fields(event)))
    reference = fold(RunView(run_id=RUN), list(writer.pending)).view
    await writer.flush()
    kept = {id(writer), id(writer.__dict__), *(id(v) for v in vars(writer).values())}
    for event in written:
        assert not [h for h in gc.get_referrers(event) if id(h) in kept]
    assert _digests(writer.view) == _digests(reference)
