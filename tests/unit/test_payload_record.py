"""A recorded payload's value, handed back without parsing its JSON text again (session 16), is
the value the parse gives: equal, of the same types, sharing nothing with what was recorded."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core.blobs import MemoryBlobStore
from agentledger._core.payloads import (
    NOT_PLAIN,
    PLAIN_COPY_DEPTH,
    Payloads,
    dumps,
    loads,
    plain_copy,
)
from agentledger.errors import PayloadError
from tests.unit.test_redaction_presence import PIECES
from tests.unit.test_redaction_walk import typed


class Text(str):
    """A str subclass (not vouched for)."""


texts = st.lists(st.sampled_from(PIECES), max_size=6).map("".join) | st.text(max_size=12)
keys = texts | st.integers(-2, 2) | st.none() | st.booleans() | texts.map(Text)
scalars = (
    texts
    | texts.map(Text)
    | st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.sampled_from([4111111111111111, 0.0, -0.0, 1e300, 5e-324])
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(keys, inner, max_size=4)
    ),
    max_leaves=16,
)
plain_values = st.recursive(
    texts
    | st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=16,
)


def containers(value: Any) -> list[int]:
    """The ids of every dict and list in ``value``."""
    if isinstance(value, dict):
        return [id(value), *(i for v in value.values() for i in containers(v))]
    if isinstance(value, list):
        return [id(value), *(i for v in value for i in containers(v))]
    return []


@settings(max_examples=500, deadline=None)
@given(values)
def test_a_copy_is_the_parse_of_the_json_text(value: Any) -> None:
    """Whatever the value, plain_copy either declines it or gives what the JSON text of it
    parses back to, with the same types, sharing no dict or list with the value."""
    try:
        text = dumps(value)
    except PayloadError:
        return
    copied = plain_copy(value)
    if copied is NOT_PLAIN:
        return
    assert typed(copied) == typed(loads(text))
    assert not set(containers(copied)) & set(containers(value))


@settings(max_examples=300, deadline=None)
@given(plain_values)
def test_plain_json_of_the_built_in_types_is_copied(value: Any) -> None:
    """Values made of exactly dicts with str keys, lists, str, int, finite float, bool and
    None are never declined (shallower than the depth limit)."""
    assert plain_copy(value) is not NOT_PLAIN


def test_what_is_not_vouched_for_is_declined() -> None:
    """A tuple, a str subclass, a key that is not a str, a float JSON has no form for, and
    nesting past the depth limit are left to the parse."""
    deep: Any = "x"
    for _ in range(PLAIN_COPY_DEPTH + 1):
        deep = [deep]
    for value in [(1,), Text("a"), {1: "a"}, {"a": float("nan")}, [float("inf")], deep]:
        assert plain_copy(value) is NOT_PLAIN
    assert plain_copy(deep[0]) is not NOT_PLAIN


@settings(max_examples=300, deadline=None)
@given(values, st.sampled_from([None, 64]))
def test_a_recorded_value_is_what_decoding_the_record_gives(
    value: Any, threshold: int | None
) -> None:
    """``value_of(record(v))`` equals ``decode`` of what ``encode(v)`` recorded, with the same
    types (inline, or stored as a blob past the threshold), and the record's fields are
    encode's; a value that cannot be recorded fails both alike."""

    async def check() -> None:
        payloads = Payloads(blobs=MemoryBlobStore(), threshold=threshold)
        try:
            encoded = await payloads.encode(value)
        except PayloadError as e:
            with pytest.raises(PayloadError, match=re.escape(str(e))):
                await payloads.record(value)
            return
        recorded = await payloads.record(value)
        assert (recorded.encoded.json, recorded.encoded.ref_hash) == (
            encoded.json,
            encoded.ref_hash,
        )
        assert recorded.redacted == payloads.redactor.json(value)
        want = await payloads.decode(encoded.json, encoded.ref_uri, encoded.ref_hash)
        assert typed(await payloads.value_of(recorded)) == typed(want)

    asyncio.run(check())


def test_a_recorded_value_is_not_the_callers() -> None:
    """The value handed back shares no dict or list with the caller's, so changing one does not
    change the other (as with a parse)."""

    async def check() -> None:
        payloads = Payloads()
        mine = {"role": "assistant", "items": [{"n": 1}]}
        back = await payloads.value_of(await payloads.record(mine))
        assert back == json.loads(json.dumps(mine))
        mine["items"][0]["n"] = 2  # type: ignore[index]
        assert back == {"role": "assistant", "items": [{"n": 1}]}

    asyncio.run(check())
