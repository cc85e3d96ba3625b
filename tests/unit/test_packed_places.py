"""A resume's places of stored effects kept as one int each: read as the models say."""

from __future__ import annotations

import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core.replay import effect_index
from agentledger.views.layout import PLACE_STATES, decode_run, encode_effect
from agentledger.views.model import EffectView, RunView

from .test_view_layout import hashes

steps = st.one_of(st.integers(0, 4), st.just(-1), st.just(2**31), st.just(2**40))
ordinals = st.one_of(st.integers(0, 3), st.just(-1), st.just(2**32 - 1), st.just(2**32))


def _effect(n: int, step: int, ordinal: int, state: str) -> EffectView:
    return EffectView(
        idempotency_key=f"k{n}", step=step, ordinal=ordinal, effect="pay", provider="p",
        kind="k", identity_hash="hmac-sha256:" + "ab" * 32, payload_hash="h",
        state=state,  # type: ignore[arg-type]
    )  # fmt: skip


def _stored(effects: list[EffectView], decoded: list[int]) -> RunView:
    """The view as a resume loads it: every effect stored led by its place; those at the
    positions ``decoded`` then read whole (a model among the packed places)."""
    run_hash, steps_hash, _ = hashes(RunView(run_id="r"))
    stored = {e.idempotency_key.encode(): encode_effect(e) for e in effects}
    view = decode_run(run_hash, steps_hash, stored)
    view.effect_briefs()  # the loader's pass while the end offsets are asked
    for n in decoded:
        if n < len(effects):
            assert view.effects[effects[n].idempotency_key] == effects[n]
    return view


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(steps, ordinals, st.sampled_from(PLACE_STATES)), max_size=10),
    st.lists(st.integers(0, 9), max_size=3),
)
def test_the_index_states_and_places_of_stored_effects_are_those_of_their_models(
    drawn: list[tuple[int, int, str]], decoded: list[int]
) -> None:
    """Whatever the steps and ordinals (negative, at and past 2**32) and states, and with some
    values decoded, the effect index, the open intents and the places a resume reads from a
    loaded view are those the effects' models give (the index built as the dict was)."""
    effects = [_effect(n, step, ordinal, state) for n, (step, ordinal, state) in enumerate(drawn)]
    view = _stored(effects, decoded)
    expected_index = {(e.step, e.ordinal): e.idempotency_key for e in effects if e.ordinal >= 0}
    assert dict(effect_index(view)) == expected_index
    assert view.placed_effects() == [
        (e.idempotency_key, e.step, e.ordinal, e.state) for e in effects
    ]
    opened = [e for e in effects if e.state in {"intended", "unknown"}]
    assert view.open_effects() == sorted(opened, key=lambda e: (e.step, e.ordinal))


def test_a_resumes_places_of_many_effects_make_no_object_per_effect_for_the_collector() -> None:
    """Reading a 1,000-effect run's places, its effect index and its open intents from the
    stored values allocates a few objects the cyclic collector tracks, not one per effect (a
    tuple per place made 1,000)."""
    effects = [_effect(n, n, 0, "succeeded") for n in range(1000)]
    run_hash, steps_hash, _ = hashes(RunView(run_id="r"))
    stored = {e.idempotency_key.encode(): encode_effect(e) for e in effects}
    view = decode_run(run_hash, steps_hash, stored)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        before = gc.get_count()[0]
        view.effect_briefs()
        index = effect_index(view)
        opened = view.open_effects()
        tracked = gc.get_count()[0] - before
    finally:
        if was_enabled:
            gc.enable()
    assert len(index) == 1000
    assert opened == []
    assert tracked < 50
