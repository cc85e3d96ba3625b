"""Idempotency keys: deterministic, unique per (run, step, effect, ordinal), provider-safe."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger._core.keys import effect_key, intent_hash
from agentledger.providers.protocol import check_key

names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}", fullmatch=True)
places = st.tuples(
    st.text(min_size=1, max_size=80), st.integers(0, 10_000), names, st.integers(0, 99)
)


def test_key_is_pinned_for_a_known_input() -> None:
    """The derivation never changes: this exact key was issued by earlier versions."""
    assert (
        effect_key("run-1", 2, "refund", 0) == "al1-refund-s2-o0-7e8b8d45b03f08c7ef59ef7b1d7b378a"
    )


@given(places)
def test_key_is_a_pure_function_and_a_valid_header(place: tuple[str, int, str, int]) -> None:
    """The same place always gives the same key, and every key travels as Idempotency-Key."""
    run, step, name, ordinal = place
    key = effect_key(run, step, name, ordinal)
    assert key == effect_key(run, step, name, ordinal)
    assert check_key(key) == key


@given(places, places)
def test_different_places_never_share_a_key(
    a: tuple[str, int, str, int], b: tuple[str, int, str, int]
) -> None:
    """Two different (run, step, effect, ordinal) places get two different keys."""
    if a != b:
        assert effect_key(*a) != effect_key(*b)


def test_run_ids_that_look_alike_do_not_alias() -> None:
    """Separators inside run ids cannot make two places collide."""
    assert effect_key("r-1", 2, "x", 0) != effect_key("r", 12, "x", 0)
    assert effect_key("a:b", 0, "x", 0) != effect_key("a", 0, "x", 0)


@pytest.mark.parametrize("bad", ["", "has space", "1starts-with-digit", "x" * 65, "é"])
def test_effect_names_are_checked(bad: str) -> None:
    """Names that cannot travel inside a key are refused with the rule."""
    with pytest.raises(ValueError, match="must match"):
        effect_key("run", 0, bad, 0)


def test_intent_hash_ignores_key_order_but_not_values() -> None:
    """An approval binds to the canonical intent: order-insensitive, value-sensitive."""
    assert intent_hash({"a": 1, "b": 2}) == intent_hash({"b": 2, "a": 1})
    assert intent_hash({"a": 1}) != intent_hash({"a": 2})
