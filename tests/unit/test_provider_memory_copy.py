"""The in-process provider's answer copy equals ``copy.deepcopy``'s and shares nothing mutable."""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentledger.providers.memory import json_copy

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=2).map(OrderedDict),
    ),
    max_leaves=20,
)


def _containers(value: Any) -> list[Any]:
    """Every dict, list and other non-scalar object inside ``value`` (itself included)."""
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in _containers(v))]
    if isinstance(value, list | tuple):
        return [value, *(c for v in value for c in _containers(v))]
    return []


@given(values)
def test_a_copy_equals_deepcopys_and_shares_no_mutable_part(value: Any) -> None:
    """Equal to what ``copy.deepcopy`` makes, of the same types, with no dict or list shared."""
    made = json_copy(value)
    assert made == copy.deepcopy(value)
    assert repr(made) == repr(copy.deepcopy(value))
    mine = {id(c) for c in _containers(value) if not isinstance(c, tuple)}
    assert not mine & {id(c) for c in _containers(made) if not isinstance(c, tuple)}
