"""The effect's two keyed hashes made together (session 16: the identity's canonical JSON made
once, the key's pads hashed once) are the hashes the two separate calls made before."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.errors import CanonicalJsonError
from agentledger.providers.hashing import KEYED_PREFIX, EffectHasher, canonical_json
from tests.unit.test_provider_hashing import _nested, json_values, odd_values


def reference_mac(key: bytes, value: object) -> str:
    """The keyed hash as ``EffectHasher._mac`` made it before: ``hmac.new`` at every call."""
    return KEYED_PREFIX + hmac.new(key, canonical_json(value), hashlib.sha256).hexdigest()


def reference_intent(key: bytes, identity: Any, free_text: Any) -> tuple[str, str] | str:
    """``(identity, payload)`` hashes as the two calls made them, or the first error."""
    try:
        return (
            reference_mac(key, identity),
            reference_mac(key, {"free_text": free_text, "identity": identity}),
        )
    except (CanonicalJsonError, TypeError) as e:  # TypeError: a Mapping json cannot encode
        return f"error: {type(e).__name__}: {e}"


def outcome(hasher: EffectHasher, identity: Any, free_text: Any) -> tuple[str, str] | str:
    try:
        return hasher.intent(identity, free_text)
    except (CanonicalJsonError, TypeError) as e:  # TypeError: a Mapping json cannot encode
        return f"error: {type(e).__name__}: {e}"


mappings = st.dictionaries(st.text(max_size=4), json_values | odd_values, max_size=4)
parts = mappings | mappings.map(MappingProxyType) | odd_values


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80), parts, parts)
def test_both_hashes_made_together_are_the_two_calls_hashes(
    key: bytes, identity: Any, free_text: Any
) -> None:
    """Plain or odd values (tuples, str subclasses, int keys, NaN, other Mappings), any key:
    the same two hashes, or the same error with its path."""
    hasher = EffectHasher(key)
    assert outcome(hasher, identity, free_text) == reference_intent(key, identity, free_text)
    if not isinstance(reference_intent(key, identity, free_text), str):
        assert hasher.identity(identity) == reference_mac(key, identity)
        assert hasher.payload(identity, free_text) == reference_mac(
            key, {"free_text": free_text, "identity": identity}
        )


@pytest.mark.parametrize("depth", [61, 62, 63, 64])
@pytest.mark.parametrize("where", ["identity", "free_text"])
def test_parts_nested_around_the_depth_limit_hash_or_fail_as_before(depth: int, where: str) -> None:
    """A part nested to the limit inside the payload's object (one level deeper than alone)
    is hashed or refused as the two calls did."""
    deep: Mapping[str, object] = {"k": _nested(depth, "x")}
    plain: Mapping[str, object] = {"a": 1}
    identity, free_text = (deep, plain) if where == "identity" else (plain, deep)
    hasher = EffectHasher(b"k")
    assert outcome(hasher, identity, free_text) == reference_intent(b"k", identity, free_text)


class Doubled(EffectHasher):
    """A hasher that hashes otherwise: its own two methods must be the ones asked."""

    def identity(self, identity: Mapping[str, object]) -> str:
        return "id:" + super().identity(identity)

    def payload(self, identity: Mapping[str, object], free_text: Mapping[str, object]) -> str:
        return "pl:" + super().payload(identity, free_text)


def test_a_hasher_that_hashes_otherwise_is_asked_through_its_own_methods() -> None:
    """A subclass overriding identity and payload gets them called by intent (as the effect
    flow called them before)."""
    identity, free_text = {"a": 1}, {"b": "x"}
    hashes = Doubled(b"k").intent(identity, free_text)
    assert hashes == (
        "id:" + reference_mac(b"k", identity),
        "pl:" + reference_mac(b"k", {"free_text": free_text, "identity": identity}),
    )
