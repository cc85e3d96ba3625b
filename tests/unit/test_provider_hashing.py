"""Canonical JSON and the effect hashes: deterministic, order-free, and frozen forever."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping

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


class _Text(str):
    """A str subclass: plain JSON by isinstance, not by type."""


def _reference_check(value: object, path: str, depth: int) -> None:
    """hashing._check as it was before the exact-type shortcut (session 10), copied here so the
    old code stays to compare with: the checking walk with paths."""
    if depth > 64:
        raise CanonicalJsonError("nested deeper than 64 levels", path=path)
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalJsonError(f"{value!r} has no JSON form", path=path)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalJsonError(f"key {key!r} is not a string", path=path)
            _reference_check(item, f"{path}.{key}", depth + 1)
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _reference_check(item, f"{path}[{index}]", depth + 1)
        return
    raise CanonicalJsonError(f"{type(value).__name__} is not a JSON type", path=path)


def _reference_canonical_json(value: object) -> bytes:
    """canonical_json before the shortcut: the old walk, then the same json.dumps call."""
    _reference_check(value, "$", 0)
    text = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return text.encode("utf-8")


def _nested(depth: int, leaf: object) -> object:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


odd_values = st.recursive(
    scalars | st.builds(_Text, st.text(max_size=3)) | st.just(math.nan) | st.just(math.inf),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3), inner, max_size=4)
        | st.dictionaries(
            st.integers(0, 3) | st.builds(_Text, st.text(max_size=2)), inner, max_size=3
        )
    ),
    max_leaves=20,
)


def _outcome(encode: Callable[[object], bytes], value: object) -> bytes | str:
    try:
        return encode(value)
    except CanonicalJsonError as e:
        return f"error: {e}"


@given(st.one_of(json_values, odd_values))
def test_canonical_json_matches_the_checking_walk(value: object) -> None:
    """The exact-type shortcut gives the bytes (and the errors, with their paths) the checking
    walk gave before it, for plain values, str subclasses, tuples, int keys, NaN and infinity."""
    assert _outcome(canonical_json, value) == _outcome(_reference_canonical_json, value)


@pytest.mark.parametrize("depth", [62, 63, 64, 65, 66])
@pytest.mark.parametrize("leaf", ["x", 1, None, True, 1.5, [], {}])
def test_canonical_json_depth_limit_is_unchanged(depth: int, leaf: object) -> None:
    """Values nested around the 64-level limit are accepted or refused as before the shortcut."""
    value = _nested(depth, leaf)
    assert _outcome(canonical_json, value) == _outcome(_reference_canonical_json, value)
