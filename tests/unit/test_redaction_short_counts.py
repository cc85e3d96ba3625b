"""A remembered short text adds to what a redaction found exactly what scanning it again would
add: the same names, in the same order, the same number of times."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.redaction import SHORT_TEXT, SHORT_TEXTS_KEPT, Redactor
from tests.unit.test_redaction_presence import PIECES, REDACTORS


class CounterRedactor(Redactor):
    """The short-text memory as it was before session 15: the names of a text's masks kept as
    ``tuple(Counter.elements())`` and added one at a time."""

    def __init__(self, base: Redactor) -> None:
        super().__init__(base.rules)
        self._kept: dict[str, tuple[str, tuple[str, ...]]] = {}

    def _text(self, value: str, found: dict[str, int]) -> str:
        if not value:
            return value
        if len(value) > SHORT_TEXT:
            return self._masked_text(value, found)
        known = self._kept.get(value)
        if known is None:
            names: Counter[str] = Counter()
            known = (self._masked_text(value, names), tuple(names.elements()))
            if len(self._kept) >= SHORT_TEXTS_KEPT:
                self._kept.clear()
            self._kept[value] = known
        for name in known[1]:
            found[name] = found.get(name, 0) + 1
        return known[0]


short_texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join)
payloads = st.recursive(
    short_texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(short_texts, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(payloads, min_size=1, max_size=4), st.sampled_from(range(len(REDACTORS))))
def test_short_texts_met_again_count_as_the_kept_reference_counts(
    values: list[Any], which: int
) -> None:
    """Redacting payloads one after another (short texts met again come from memory) gives the
    values and the found names, counts and order the kept Counter reference gives."""
    redactor = Redactor(REDACTORS[which].rules)
    reference = CounterRedactor(REDACTORS[which])
    for value in [*values, *values]:
        got, want = redactor.redact(value), reference.redact(value)
        assert got.value == want.value
        assert list(got.found.items()) == list(want.found.items())
