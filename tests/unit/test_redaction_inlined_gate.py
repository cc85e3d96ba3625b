"""The scan's inlined hint check searches what ``Rule.may_hold`` searched and records the same
work; a key's sensitivity, remembered, is what its normalised form says."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.redaction import (
    DEFAULT_REDACTOR,
    PRESENCE_FROM,
    SENSITIVE_KEYS,
    SHORT_TEXTS_KEPT,
    Redactor,
    _norm_key,
)
from agentledger.redaction.rules import present_chars
from agentledger.redaction.scan import Work
from tests.unit.test_redaction_presence import PIECES, REDACTORS, long_texts, merged_spans, texts


def reference_scan(redactor: Redactor, value: str) -> tuple[list[tuple[int, int, str]], Work]:
    """``Redactor.scan(value)`` as it was before the hint check was inlined (session 14's first
    pass: one ``Rule.may_hold`` call a rule)."""
    work = Work()
    found: list[tuple[int, int, int]] = []
    lowered = value.lower() if value.isascii() else None
    plain: set[str] | None = None
    folded: set[str] | None = None
    if len(value) >= PRESENCE_FROM:
        plain = present_chars(redactor._plain_chars, value)
        if lowered is not None:
            folded = present_chars(redactor._folded_chars, lowered)
    for index, rule in enumerate(redactor.rules):
        if rule.may_hold(value, lowered, work, folded if rule.hint_folds else plain):
            found.extend(
                (begin, end, index) for begin, end in rule.find_anywhere(value, work) if end > begin
            )
    return merged_spans(redactor, found), work


@settings(max_examples=400, deadline=None)
@given(long_texts)
def test_the_scan_finds_and_works_as_with_a_call_a_rule(text: str) -> None:
    """Short or long, ASCII or not, default or project rules: the same spans and the same work."""
    for redactor in REDACTORS:
        scan = redactor.scan(text)
        assert (scan.spans, scan.work) == reference_scan(redactor, text), text


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PIECES), texts)
def test_a_long_text_scans_as_with_a_call_a_rule(piece: str, text: str) -> None:
    """Past the length of the characters' pass, the same spans and work too."""
    padded = ("0123456789abcdef" * (PRESENCE_FROM // 16 + 1)) + " " + piece + " " + text
    for redactor in REDACTORS:
        scan = redactor.scan(padded)
        assert (scan.spans, scan.work) == reference_scan(redactor, padded), padded


keys = st.one_of(
    st.sampled_from(sorted(SENSITIVE_KEYS)),
    st.sampled_from(["clientSecret", "X-Api-Key", "aws_secret_access_key", "role", "body"]),
    st.text(max_size=24),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(keys, max_size=12))
def test_a_key_is_sensitive_as_its_normalised_form_says_asked_once_or_again(
    names: list[str],
) -> None:
    """Asked first or again, a key is sensitive exactly when its normalised form is a
    sensitive key or ends with a sensitive suffix."""
    redactor = Redactor()
    for name in names + names:
        norm = _norm_key(name)
        expected = norm in redactor.sensitive_keys or norm.endswith(redactor.sensitive_suffixes)
        assert redactor.sensitive(name) is expected, name


def test_the_remembered_keys_are_bounded() -> None:
    """A redactor remembers at most SHORT_TEXTS_KEPT keys, and still answers past that."""
    redactor = Redactor()
    for n in range(SHORT_TEXTS_KEPT + 10):
        assert not redactor.sensitive(f"field{n}")
    assert len(redactor._keys) <= SHORT_TEXTS_KEPT
    assert DEFAULT_REDACTOR.sensitive("clientSecret")
