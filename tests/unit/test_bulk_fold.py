"""The rebuild's plain fold (views/bulk_fold.py) stores the very bytes the model fold and the
view layout store, on generated event sequences: fences moved, duplicates, gaps, stale and
conflicting writes, every event kind (LangGraph checkpoints and forks take the fallback)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.events import RunEvent
from agentledger.events.models import (
    ActivityRecorded,
    CheckpointSaved,
    CheckpointsDeleted,
    EffectRecorded,
    RunForked,
    WritesSaved,
)
from agentledger.projector.applier import index_update
from agentledger.projector.parking import unique_parked
from agentledger.projector.testing import sample_run
from agentledger.views import RunView, fold
from agentledger.views.bulk_fold import ENABLED, PlainRun
from agentledger.views.layout import encode_effect, encode_run, encode_step

from .event_samples import RUN, samples

RUN_EVENTS: list[RunEvent] = [e for e in samples() if isinstance(e, RunEvent)]
_FALLBACK_KINDS = (RunForked, CheckpointSaved, WritesSaved, CheckpointsDeleted)
PLAIN_EVENTS = [e for e in RUN_EVENTS if not isinstance(e, _FALLBACK_KINDS)]
#: Text that JSON writers escape differently if they can: quotes, controls, non-ASCII, U+2028.
_ODD_TEXT = st.text(
    alphabet=st.sampled_from(['"', "\\", "\n", "\x01", "\x7f", "é", "\u2028", "😀", "a", "/"]),
    max_size=6,
)
_ODD_FLOAT = st.sampled_from([0.0, -0.0, 0.1, 1e16, 1.5e-7, 2.5, math.inf, math.nan, 1e300])


@st.composite
def _odd_values(draw: st.DrawFn, event: RunEvent) -> RunEvent:
    """``event`` with some of its text fields and costs replaced by awkward values."""
    update: dict[str, Any] = {}
    for name, info in type(event).model_fields.items():
        if name in {"run_id", "event_id"} or not draw(st.booleans()):
            continue
        # inherited_json is a document the fold parses (a fork's inherited steps and effects,
        # written by the worker from a view): awkward text there is no event a writer makes.
        if info.annotation is str and name not in {"idempotency_key", "inherited_json"}:
            update[name] = draw(_ODD_TEXT)
    if isinstance(event, ActivityRecorded | EffectRecorded) and draw(st.booleans()):
        update["usd"] = draw(_ODD_FLOAT)
    return event.model_copy(update=update) if update else event


@st.composite
def _deliveries(draw: st.DrawFn, pool: list[RunEvent]) -> list[RunEvent]:
    """Events of ``pool`` in any order, renumbered, with fences moved, duplicates and gaps."""
    picked = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=24))
    events: list[RunEvent] = []
    seq = 0
    for event in picked:
        seq += draw(st.sampled_from([1, 1, 1, 1, 2, 0]))
        fence = draw(st.sampled_from([event.fence, event.fence, event.fence + 1, 0]))
        update = {"seq": max(1, seq), "fence": fence, "worker_id": f"w{fence}"}
        changed = event.model_copy(update=update)
        if draw(st.integers(min_value=0, max_value=3)) == 0:
            changed = draw(_odd_values(changed))
        events.append(changed)
        if draw(st.booleans()) and draw(st.booleans()):
            events.append(events[-1])  # redelivered
    return draw(st.permutations(events))


@st.composite
def _histories(draw: st.DrawFn, pool: list[RunEvent]) -> list[RunEvent]:
    """Mostly gapless histories: consecutive seqs, a fence that grows and sometimes falls back
    (a zombie), redeliveries, a rare gap, delivered in order or shuffled."""
    picked = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=30))
    events: list[RunEvent] = []
    seq, fence = 0, 1
    for event in picked:
        seq += draw(st.sampled_from([1] * 12 + [2, 0]))
        move = draw(st.sampled_from([0] * 8 + [1, -1]))
        fence = max(0, fence + move)
        update = {"seq": max(1, seq), "fence": fence, "worker_id": f"w{fence}"}
        changed = event.model_copy(update=update)
        if draw(st.integers(min_value=0, max_value=4)) == 0:
            changed = draw(_odd_values(changed))
        events.append(changed)
        if draw(st.integers(min_value=0, max_value=5)) == 0:
            events.append(draw(st.sampled_from(events)))  # redelivered, maybe much later
    return draw(st.permutations(events)) if draw(st.booleans()) else events


def _stored(view: RunView, parked: int) -> tuple[dict[str, bytes], ...]:
    """What the view stores write for ``view``: run, steps and effects hashes."""
    return (
        encode_run(view, parked),
        {str(i): encode_step(s) for i, s in view.steps.items()},
        {k: encode_effect(e) for k, e in view.effects.items()},
    )


def _fold_both(events: list[RunEvent], chunks: int) -> tuple[PlainRun, RunView, list[RunEvent]]:
    """Fold ``events`` in ``chunks`` with both folds, checking each chunk's verdicts agree."""
    plain, view = PlainRun(RUN), RunView(run_id=RUN)
    plain_parked: list[RunEvent] = []
    model_parked: list[RunEvent] = []
    size = max(1, len(events) // chunks)
    for start in range(0, len(events), size):
        chunk = events[start : start + size]
        applied, parked = plain.fold(plain_parked + chunk)
        result = fold(view, model_parked + chunk, in_place=True)
        assert applied == len(result.applied)
        assert parked == result.parked
        plain_parked, model_parked = unique_parked(parked), unique_parked(result.parked)
    return plain, view, model_parked


def _assert_same_store(plain: PlainRun, view: RunView, parked: list[RunEvent]) -> None:
    """The plain fold's stored bytes and index facts are the model fold's."""
    assert plain.stored(len(parked), 0) == _stored(view, len(parked))
    assert plain.stored(len(parked), 7) == (
        encode_run(view, len(parked), 7),
        *_stored(view, len(parked))[1:],
    )
    expected = index_update(view, cold=True, status_before=view.status, effects=(), parked=False)
    status, updated_at, finished_at, opened = plain.index_facts()
    assert (status, updated_at, finished_at) == (view.status, view.updated_at, view.finished_at)
    assert opened == dict(expected.open_intents)


@settings(max_examples=150, deadline=None)
@given(_deliveries(PLAIN_EVENTS), st.integers(min_value=1, max_value=4))
def test_plain_fold_stores_what_the_model_fold_stores(events: list[RunEvent], chunks: int) -> None:
    """Folding a run's events in chunks with the plain fold gives, chunk by chunk, the same
    applied and parked events, and at the end the same run, steps and effects bytes and index
    facts as the model fold encoded by the view layout."""
    plain, view, parked = _fold_both(events, chunks)
    _assert_same_store(plain, view, parked)


@settings(max_examples=250, deadline=None)
@given(_histories(PLAIN_EVENTS), st.integers(min_value=1, max_value=4))
def test_plain_fold_stores_what_the_model_fold_stores_for_long_histories(
    events: list[RunEvent], chunks: int
) -> None:
    """The same on mostly gapless histories, where most events are applied: same applied and
    parked events per chunk, same stored bytes and index facts."""
    plain, view, parked = _fold_both(events, chunks)
    _assert_same_store(plain, view, parked)


@settings(max_examples=150, deadline=None)
@given(st.one_of(_deliveries(RUN_EVENTS), _histories(RUN_EVENTS)), st.integers(1, 4))
def test_every_event_kind_stores_what_the_model_fold_stores(
    events: list[RunEvent], chunks: int
) -> None:
    """With forks and LangGraph checkpoint events in the mix (which the plain fold hands to the
    model fold, from wherever they turn up) the stored bytes are still the model fold's."""
    plain, view, parked = _fold_both(events, chunks)
    _assert_same_store(plain, view, parked)


def test_the_plain_path_is_taken_for_an_ordinary_run() -> None:
    """A run of ordinary kinds stays in plain data (the fast path is really used), and a
    LangGraph checkpoint event turns it into its model for the rest of the run."""
    assert ENABLED
    plain = PlainRun(RUN)
    ordinary = [e for e in PLAIN_EVENTS if e.seq <= 9]
    applied, parked = plain.fold(ordinary)
    assert (applied, parked) == (len(ordinary), [])
    assert plain.view is None
    graph = next(e for e in RUN_EVENTS if isinstance(e, CheckpointSaved))
    plain.fold([graph.model_copy(update={"seq": 10})])
    assert plain.view is not None
    assert plain.view.applied_seq == 10


def test_a_value_plain_json_will_not_write_is_encoded_by_the_model_path() -> None:
    """An infinite cost (which plain_json leaves to pydantic's dump) is stored as the model
    path stores it, not guessed at."""
    activity = next(e for e in PLAIN_EVENTS if isinstance(e, ActivityRecorded))
    events = [e for e in PLAIN_EVENTS if e.seq < activity.seq]
    events.append(activity.model_copy(update={"usd": math.inf}))
    plain, view, parked = _fold_both(events, 1)
    assert plain.view is None
    _assert_same_store(plain, view, parked)


def test_events_of_another_run_are_refused() -> None:
    """Like the model fold, the plain fold refuses an event of another run."""
    other = PLAIN_EVENTS[0].model_copy(update={"run_id": "someone-else"})
    with pytest.raises(ValueError, match="someone-else"):
        PlainRun(RUN).fold([other])


@pytest.mark.parametrize("chunk", [1, 3, 7, 50])
def test_runs_longer_than_the_digest_window_store_what_the_model_fold_stores(chunk: int) -> None:
    """A run of 38 gapless events (past the 16 seqs whose digests the view keeps), with
    redeliveries and a zombie's stale write among them, folded in chunks of ``chunk``: the
    same applied and parked events per chunk and the same stored bytes as the model fold."""
    events = sample_run(RUN, steps=6, start_ms=1_000)
    stale = events[20].model_copy(update={"seq": 30, "fence": 0, "worker_id": "w0"})
    delivered = [*events[:25], events[3], events[24], stale, *events[25:], events[30]]
    plain, view, parked = _fold_both(delivered, max(1, len(delivered) // chunk))
    assert plain.view is None
    assert view.applied_seq == len(events)
    _assert_same_store(plain, view, parked)


def test_an_event_of_another_run_is_refused_wherever_it_is_in_the_chunk() -> None:
    """The plain fold refuses a chunk with an event of another run after events of its own,
    and names the first such run."""
    own = [e for e in PLAIN_EVENTS if e.seq <= 3]
    others = [PLAIN_EVENTS[0].model_copy(update={"run_id": f"someone-{n}"}) for n in (1, 2)]
    with pytest.raises(ValueError, match="someone-1"):
        PlainRun(RUN).fold([*own, *others])
