"""The session's effect index: places kept as one int each, read and written as the dict was."""

from __future__ import annotations

import gc
from typing import Any, cast

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core.replay import EffectIndex, effect_index
from agentledger.views import RunView

Place = tuple[str, int, int, str]

steps = st.one_of(st.integers(0, 5), st.integers(-3, -1), st.just(2**40))
ordinals = st.one_of(
    st.integers(0, 3), st.integers(-2, -1), st.just(2**32 - 1), st.just(2**32), st.just(2**33 + 1)
)
places = st.lists(
    st.tuples(st.sampled_from(["k1", "k2", "k3", "k4"]), steps, ordinals, st.just("intended")),
    max_size=12,
)


class Placed:
    """A view reduced to what the index reads: the places of its effects."""

    def __init__(self, found: list[Place]) -> None:
        self.found = found

    def effect_briefs(self) -> tuple[list[str], list[object]]:
        return [key for key, *_ in self.found], list(self.found)


def reference(found: list[Place]) -> dict[tuple[int, int], str]:
    """The index as it was built before: a dict keyed by (step, ordinal)."""
    return {(step, ordinal): key for key, step, ordinal, _ in found if ordinal >= 0}


def index_of(found: list[Place]) -> EffectIndex:
    return effect_index(cast("RunView", cast("Any", Placed(found))))


@settings(max_examples=300)
@given(places, st.lists(st.tuples(steps, ordinals), max_size=6))
def test_the_index_holds_and_answers_what_the_dict_of_places_did(
    found: list[Place], asked: list[tuple[int, int]]
) -> None:
    """Every place the dict held, and only those, with the same key (the last one at a place),
    whatever the step and ordinal; any place asked answers as the dict answered."""
    index = index_of(found)
    expected = reference(found)
    assert dict(index) == expected
    assert len(index) == len(expected)
    assert index == expected
    for place in [*expected, *asked]:
        assert index.get(place) == expected.get(place)
        assert (place in index) == (place in expected)


@settings(max_examples=200)
@given(places, st.lists(st.tuples(steps, ordinals, st.sampled_from(["n1", "n2"])), max_size=6))
def test_places_written_later_read_back_as_in_the_dict(
    found: list[Place], written: list[tuple[int, int, str]]
) -> None:
    """Effects indexed while the run goes on (and places removed) read back as the dict's."""
    index = index_of(found)
    expected = reference(found)
    for step, ordinal, key in written:
        index[(step, ordinal)] = key
        expected[(step, ordinal)] = key
    assert index == expected
    for place in list(expected)[::2]:
        del index[place]
        del expected[place]
    assert dict(index) == expected


def test_an_index_of_many_effects_makes_no_object_per_effect_for_the_collector() -> None:
    """Indexing a 1,000-effect run allocates a few objects the cyclic collector tracks, not
    one per effect (the dict of (step, ordinal) tuples made 1,000)."""
    found: list[Place] = [(f"k{i}", i, 0, "succeeded") for i in range(1000)]
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        before = gc.get_count()[0]
        index = index_of(found)
        tracked = gc.get_count()[0] - before
    finally:
        if was_enabled:
            gc.enable()
    assert len(index) == 1000
    assert tracked < 50
