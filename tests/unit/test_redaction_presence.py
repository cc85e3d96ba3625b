"""The scan's one pass over a long text for the characters of every hint word finds exactly the
spans the scan that searched every hint word found (a kept copy of it below)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.redaction import DEFAULT_REDACTOR, PRESENCE_FROM, Redactor, Rule
from agentledger.redaction.scan import Work

# A project's own rules beside the default ones: a case-sensitive word hint, a folding one,
# and a hint that is a pattern (searched as before, never by its characters).
PROJECT_RULES = (
    Rule.of("zq_id", r"ZQ-[0-9]{6}", anchor="ZQ-", hint="ZQ-"),
    Rule.of(
        "vault_ref",
        r"vault:[a-z]{4}",
        flags=re.IGNORECASE,
        anchor="(?i:vault:)",
        hint="vault",
        hint_folds=True,
    ),
    Rule.of("tagged", r"<k>[0-9]{3}", anchor="<k>", hint=r"<k>[0-9]"),
)
REDACTORS = (DEFAULT_REDACTOR, Redactor(DEFAULT_REDACTOR.rules + PROJECT_RULES))


def reference_may_hold(rule: Rule, text: str, lowered: str | None) -> bool:
    """The hint check as it was before the characters' pass (session 6's ``may_hold``)."""
    if rule.hint is None:
        return True
    if rule.hint_folds:
        if lowered is None:
            return True
        text = lowered
    if rule.hint_words:
        return any(word in text for word in rule.hint_words)
    return rule.hint.search(text) is not None


def merged_spans(
    redactor: Redactor, found: list[tuple[int, int, int]]
) -> list[tuple[int, int, str]]:
    """The (begin, end, rule index) finds of a reference scan as the scan's spans: sorted,
    overlapping ones merged, named by the first rule."""
    spans: list[tuple[int, int, str]] = []
    for begin, end, index in sorted(found):
        if spans and begin < spans[-1][1]:
            spans[-1] = (spans[-1][0], max(spans[-1][1], end), spans[-1][2])
        else:
            spans.append((begin, end, redactor.rules[index].name))
    return spans


def reference_spans(redactor: Redactor, value: str) -> list[tuple[int, int, str]]:
    """``Redactor.scan(value).spans`` as it was computed before the characters' pass."""
    work = Work()
    found: list[tuple[int, int, int]] = []
    lowered = value.lower() if value.isascii() else None
    for index, rule in enumerate(redactor.rules):
        if reference_may_hold(rule, value, lowered):
            found.extend(
                (begin, end, index) for begin, end in rule.find_anywhere(value, work) if end > begin
            )
    return merged_spans(redactor, found)


# Pieces of secrets, of hint words and of ordinary long texts (hex ids, prose, non-ASCII).
PIECES = [
    "sk-", "sk-proj-abcdefghijklmnopqrstuvwxyz", "sk_live_", "rk_test_0123456789abcdef",
    "AKIA", "AKIAIOSFODNN7EXAMPLE", "ghp_", "ghp_" + "a1B2" * 9, "github_pat_", "xoxb-",
    "xoxb-1234567890-abcdef", "AIza", "whsec_", "npm_", "hf_", "eyJ", "eyJhbGciOi.eyJzdWIi",
    "Bearer ", "bearer abcdefgh1234", "BASIC ", "Basic dXNlcjpwYXNz", "AWS_SECRET", "aws",
    "Password", "password=hunter22", "apiKey", "api_key: s3cr3t", "pwd:", "token", "SECRET",
    "credential", "access", "private", "https://hooks.slack.com/services/T0/B1/x",
    "https://user:pw@example.com/", "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END ",
    "4111 1111 1111 1111", "378282246310005", "ZQ-123456", "zq-", "VAULT:abcd", "vault",
    "<k>123", "<k>", "\u212a", "\u017f", "\u00e9", "x", "9", " ", "_", "-", "=", ":", "\n",
    "0123456789abcdef" * 4, "The assistant considers the request. ", "deadbeef" * 8,
]  # fmt: skip

texts = st.lists(st.sampled_from(PIECES), max_size=24).map("".join)
long_texts = st.tuples(texts, st.text(max_size=40), texts).map("".join)


@settings(max_examples=400, deadline=None)
@given(long_texts)
def test_the_scan_finds_what_it_found_before_the_characters_pass(text: str) -> None:
    """Short or long, ASCII or not, with default or project rules: the same spans, so the same
    masked text."""
    for redactor in REDACTORS:
        assert redactor.scan(text).spans == reference_spans(redactor, text), text


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(PIECES), texts)
def test_a_long_text_gets_the_same_spans_as_before(piece: str, text: str) -> None:
    """A text past the length from which the characters' pass is made masks as before."""
    padded = ("0123456789abcdef" * (PRESENCE_FROM // 16 + 1)) + " " + piece + " " + text
    assert len(padded) >= PRESENCE_FROM
    for redactor in REDACTORS:
        assert redactor.scan(padded).spans == reference_spans(redactor, padded), padded
