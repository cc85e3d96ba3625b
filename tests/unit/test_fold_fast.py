"""The fold's fast field writes and digest change nothing: same views, verdicts and digests as
the fold before them (tests/unit/reference_fold.py), on generated event sequences."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from agentledger.events import RunEvent
from agentledger.views import RunView, fold
from agentledger.views.fold import event_digest

from . import reference_fold
from .event_samples import RUN, samples

RUN_EVENTS: list[RunEvent] = [e for e in samples() if isinstance(e, RunEvent)]
_VERDICTS = ("applied", "duplicates", "parked", "stale", "conflicts", "divergent", "closed")


def _fields_set(value: Any) -> Any:
    """Every model's set of explicitly set fields, through nested models, dicts and lists."""
    if isinstance(value, BaseModel):
        nested = {n: _fields_set(getattr(value, n)) for n in type(value).model_fields}
        return (sorted(value.model_fields_set), nested)
    if isinstance(value, dict):
        return {k: _fields_set(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fields_set(v) for v in value]
    return None


@st.composite
def _deliveries(draw: st.DrawFn) -> list[RunEvent]:
    """Sample run events in any order, renumbered, with fences moved, duplicates and gaps."""
    picked = draw(st.lists(st.sampled_from(RUN_EVENTS), min_size=1, max_size=24))
    events: list[RunEvent] = []
    seq = 0
    for event in picked:
        seq += draw(st.sampled_from([1, 1, 1, 1, 2, 0]))
        fence = draw(st.sampled_from([event.fence, event.fence, event.fence + 1, 0]))
        update = {"seq": max(1, seq), "fence": fence, "worker_id": f"w{fence}"}
        events.append(event.model_copy(update=update))
        if draw(st.booleans()) and draw(st.booleans()):
            events.append(events[-1])  # redelivered
    return draw(st.permutations(events))


@settings(max_examples=300, deadline=None)
@given(_deliveries(), st.integers(min_value=1, max_value=4))
def test_fast_fold_equals_the_reference_fold(events: list[RunEvent], chunks: int) -> None:
    """Folding in chunks gives views equal (fields and set fields) to the reference fold's,
    with the same events in every verdict list and the same touched steps and effects."""
    new, old = RunView(run_id=RUN), RunView(run_id=RUN)
    size = max(1, len(events) // chunks)
    for start in range(0, len(events), size):
        chunk = events[start : start + size]
        got = fold(new, chunk, in_place=True)
        want = reference_fold.fold(old, chunk, in_place=True)
        for verdict in _VERDICTS:
            assert getattr(got, verdict) == getattr(want, verdict), verdict
        assert got.touched_steps == want.touched_steps
        assert got.touched_effects == want.touched_effects
        assert got.view == want.view
        assert got.view.model_dump(mode="json") == want.view.model_dump(mode="json")
        assert _fields_set(got.view) == _fields_set(want.view)


def test_copying_fold_equals_the_reference_and_leaves_its_input_alone() -> None:
    """Without in_place the fold leaves the given view as it was, like the reference fold."""
    start = reference_fold.fold(RunView(run_id=RUN), RUN_EVENTS[:3]).view
    before = start.model_dump()
    got = fold(start, RUN_EVENTS[3:]).view
    assert start.model_dump() == before
    assert got == reference_fold.fold(start, RUN_EVENTS[3:]).view


def test_event_digest_hashes_what_it_always_hashed() -> None:
    """The digest of every run event is the first 16 hex digits of sha256 of its type name,
    a colon and its JSON without id and time (views in Redis keep digests made this way)."""
    for event in RUN_EVENTS:
        body = event.model_dump_json(exclude={"event_id", "occurred_at"})
        text = f"{type(event).__name__}:{body}"
        assert event_digest(event) == hashlib.sha256(text.encode()).hexdigest()[:16]
        assert event_digest(event) == reference_fold.event_digest(event)
