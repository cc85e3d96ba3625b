"""The walk of a JSON value by its values' exact types (session 16) redacts as the walk by
``isinstance`` before it: the same value, of the same types, and the same found names, counts
and order."""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.redaction import Redactor
from tests.unit.test_redaction_presence import PIECES, REDACTORS


class IsinstanceWalkRedactor(Redactor):
    """``Redactor._json`` as it was before session 16: every value by ``isinstance``, every key
    of a mapping through ``_text`` and ``sensitive``."""

    def _json(self, value: Any, found: dict[str, int]) -> Any:
        if isinstance(value, str):
            return self._text(value, found)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            return self._number(value, found)
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                name = self._text(key, found) if isinstance(key, str) else key
                if (
                    isinstance(key, str)
                    and self.sensitive(key)
                    and item
                    and not isinstance(item, bool)
                ):
                    found["sensitive_key"] = found.get("sensitive_key", 0) + 1
                    out[name] = self._masked("sensitive_key")
                else:
                    out[name] = self._json(item, found)
            return out
        if isinstance(value, list | tuple):
            return [self._json(item, found) for item in value]
        return value


class Text(str):
    """A str subclass (walked by the general branch)."""


class Number(int):
    """An int subclass (walked by the general branch)."""


KEYS = ["role", "content", "password", "clientSecret", "api-key", "token", "step", "x" * 130]
texts = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)
keys = (
    st.sampled_from(KEYS)
    | texts
    | texts.map(Text)
    | st.integers(-3, 3)
    | st.none()
    | st.booleans()
    | st.floats(allow_nan=False)
)
scalars = (
    texts
    | texts.map(Text)
    | st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from(
        [10**12 - 1, 10**12, -(10**12), 4222222222222, -4222222222222, 4111111111111111]
    )
    | st.integers().map(Number)
    | st.floats()
    | st.just(4111111111111111.0)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(keys, inner, max_size=4)
        | st.dictionaries(keys, inner, max_size=3).map(MappingProxyType)
    ),
    max_leaves=16,
)


def typed(value: Any) -> Any:
    """``value`` with every node's exact type beside it (``==`` alone has True == 1)."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [typed(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


@settings(max_examples=400, deadline=None)
@given(st.lists(values, min_size=1, max_size=3), st.sampled_from(range(len(REDACTORS))))
def test_the_walk_by_exact_types_redacts_as_the_isinstance_walk(
    payloads: list[Any], which: int
) -> None:
    """Payloads redacted one after another (keys met again come from memory) give the values,
    with their types, and the found names, counts and order of the kept reference walk."""
    redactor = Redactor(REDACTORS[which].rules)
    reference = IsinstanceWalkRedactor(REDACTORS[which].rules)
    for payload in [*payloads, *payloads]:
        got, want = redactor.redact(payload), reference.redact(payload)
        assert typed(got.value) == typed(want.value)
        assert list(got.found.items()) == list(want.found.items())


def test_integers_of_twelve_digits_are_passed_over_and_cards_still_masked() -> None:
    """The bound of the integer shortcut: a 12-digit integer is kept, a 13-digit card masked
    (as a number and under a key), as the reference walk does."""
    redactor, reference = Redactor(), IsinstanceWalkRedactor()
    for value in [
        10**12 - 1,
        -(10**12 - 1),
        4222222222222,
        -4222222222222,
        {"n": 4111111111111111},
    ]:
        assert redactor.redact(value) == reference.redact(value)
    assert redactor.json(4222222222222) == "[REDACTED:card_number]"
