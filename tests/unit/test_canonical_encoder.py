"""canonical_json's encoder, made once, writes what ``json.dumps`` with its arguments wrote."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.providers.hashing import canonical_json

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(values)
def test_canonical_json_is_json_dumps_with_its_arguments(value: object) -> None:
    """Sorted keys, no whitespace, UTF-8 kept: byte for byte what json.dumps wrote."""
    expected = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")
    assert canonical_json(value) == expected
