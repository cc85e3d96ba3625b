"""plain_json.dumps writes a dict with text keys through its cached key order byte for byte as
the JSON encoder writes it with sorted keys, whatever the values, the order the keys were set
in, and whether the order was cached before, could be cached, or is of other keys."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.views import plain_json

text = st.text(alphabet=st.characters(codec="utf-8"), max_size=6)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=5),
    max_leaves=12,
)
# a few key sets again and again (as a run's models' fields are), so the cache is hit
keysets = st.sampled_from(
    [("b", "a"), ("usd", "tokens", "steps"), ("\u00e9", "e", "E", ""), ("k",)]
)


def _reference(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(text, values, min_size=1, max_size=6))
def test_text_keyed_dicts_read_as_the_encoder_writes_them(value: dict[str, Any]) -> None:
    """A dict with text keys, nested values of every kind: the same text, first and again."""
    assert plain_json.dumps(value) == _reference(value)
    assert plain_json.dumps(value) == _reference(value)


@settings(max_examples=300, deadline=None)
@given(keysets, st.lists(values, min_size=4, max_size=4), st.randoms())
def test_a_cached_order_serves_any_values_and_insertion_order(
    keys: tuple[str, ...], vals: list[Any], rnd: Any
) -> None:
    """The same keys set in another order, with other values, read as sorted keys."""
    order = list(keys)
    rnd.shuffle(order)
    value = dict(zip(order, vals, strict=False))
    assert plain_json.dumps(value) == _reference(value)


def test_a_full_cache_writes_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no room left to cache an order, a dict is written the same, and nothing is kept."""
    monkeypatch.setattr(plain_json, "_ORDERS", {})
    monkeypatch.setattr(plain_json, "_ORDERS_MAX", 0)
    value = {"zeta": 1, "alpha": [None, "x"], "mid": {"b": 2.5, "a": True}}
    assert plain_json.dumps(value) == _reference(value)
    assert plain_json._ORDERS == {}


def test_int_and_mixed_keys_are_never_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    """Int keys sort by their digits, a bool key is refused, mixed keys too: none is cached."""
    monkeypatch.setattr(plain_json, "_ORDERS", {})
    assert plain_json.dumps({10: "a", 9: "b"}) == '{"10":"a","9":"b"}'
    with pytest.raises(plain_json.Unusual):
        plain_json.dumps({True: "a"})
    assert plain_json.dumps({"b": 1, 2: 3}) == '{"2":3,"b":1}'
    assert plain_json._ORDERS == {}
