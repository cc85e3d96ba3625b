"""Canonical JSON and the effect hashes: deterministic, order-free, and frozen forever."""

from __future__ import annotations

import hashlib
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger.errors import CanonicalJsonError
from agentledger.providers.hashing import (
    canonical_json,
    identity_hash,
    payload_hash,
    response_hash,
    sha256_hex,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def test_canonical_json_is_compact_sorted_utf8() -> None:
    """Keys are sorted at every level, there is no whitespace, and non-ASCII stays UTF-8."""
    value = {"b": [1, {"z": True, "a": None}], "a": "é"}
    assert canonical_json(value) == '{"a":"é","b":[1,{"a":null,"z":true}]}'.encode()


def test_golden_hashes_never_change() -> None:
    """The identity and payload hashes of a fixed effect are pinned: recorded hashes must match."""
    identity = {"recipient": "cus_1", "amount": 1250, "currency": "eur"}
    assert identity_hash(identity) == (
        "b32ed81ec736fe4af868ef5102326b3bc4dd72fee27d62f1fe29a15e8534217f"
    )
    assert payload_hash(identity, {"memo": "refund"}) == (
        "006e46a023a25903e2fa2ebd5bb4d6491dcdc86e1f6cb7664eb61d7b0eb0a981"
    )


@given(st.dictionaries(st.text(), json_values, max_size=6))
def test_hash_ignores_key_order(value: dict[str, object]) -> None:
    """Two mappings with the same items hash alike whatever their insertion order."""
    reordered = dict(reversed(list(value.items())))
    assert sha256_hex(value) == sha256_hex(reordered)


def test_identity_and_free_text_cannot_alias() -> None:
    """Moving a field from identity to free text changes the payload hash."""
    as_identity = payload_hash({"to": "a", "body": "hi"}, {})
    as_free_text = payload_hash({"to": "a"}, {"body": "hi"})
    assert as_identity != as_free_text


def test_int_and_float_are_different_values() -> None:
    """1 and 1.0 hash differently: amounts belong in integer minor units."""
    assert identity_hash({"amount": 1}) != identity_hash({"amount": 1.0})


def test_response_hash_is_the_sha256_of_canonical_json() -> None:
    """response_hash is sha256 over the canonical bytes."""
    response = {"id": "pay_1", "status": "succeeded"}
    assert response_hash(response) == hashlib.sha256(canonical_json(response)).hexdigest()


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"amount": math.nan}, "$.amount"),
        ({"amount": math.inf}, "$.amount"),
        ({1: "x"}, "$"),
        ({"blob": b"bytes"}, "$.blob"),
        ({"items": [1, {2, 3}]}, "$.items[1]"),
    ],
)
def test_non_json_values_are_refused_with_their_path(value: object, path: str) -> None:
    """NaN, infinity, non-string keys and non-JSON types raise CanonicalJsonError naming where."""
    with pytest.raises(CanonicalJsonError) as caught:
        canonical_json(value)
    assert caught.value.path == path
