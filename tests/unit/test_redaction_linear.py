"""Redaction takes time linear in the text, even on texts built to make regexes backtrack."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger.redaction import DEFAULT_REDACTOR, DEFAULT_RULES

MB = 1_000_000

# Pieces of the shapes the rules look for, cut short so that they almost match: repeated without
# whitespace, they are the inputs on which a backtracking pattern restarts at every position.
FRAGMENTS = [
    "a", "A", "1", ".", "-", "_", ":", "@", "/", "=", "&", "?", '"', "\\", " ", "\u00a0",
    "://", "a.b-c", "eyJ", "eyJa.", ".eyJ", "sk-", "sk_live_", "AKIA", "ghp_", "xoxb-", "AIza",
    "whsec_", "npm_", "hf_", "bearer ", "Basic ", "-----BEGIN ", "PRIVATE KEY", "-----END ",
    "aws_secret", "token", "Secret", "api_key", "password=", "pwd:", "4111", "4111 ", "4111.",
    "1111-", "https://hooks.slack.com/services/",
]  # fmt: skip

units = st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=5).map("".join)


def repeated(unit: str, size: int) -> str:
    """``unit`` repeated to exactly ``size`` characters."""
    return (unit * (size // len(unit) + 1))[:size]


#: The largest window any default rule gives the backtracking engine in one call.
WIDEST = max(rule.window for rule in DEFAULT_RULES if rule.finder is None)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(units)
def test_work_is_linear_on_generated_worst_cases_of_one_megabyte(unit: str) -> None:
    """On 1 MB of a repeated near-miss the engine only ever gets bounded windows and the work
    of 1 MB is about twice that of 0.5 MB (a quadratic scan would be four times)."""
    half = DEFAULT_REDACTOR.scan(repeated(unit, MB // 2)).work
    full = DEFAULT_REDACTOR.scan(repeated(unit, MB)).work
    assert full.unbounded == 0
    assert full.widest <= WIDEST
    assert full.chars <= 2 * half.chars + 4 * WIDEST * len(DEFAULT_RULES)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(units, st.integers(0, MB))
def test_a_secret_inside_a_megabyte_of_near_misses_is_masked(unit: str, at: int) -> None:
    """A secret placed anywhere in 1 MB of near-misses is still masked."""
    secret = "sk-" + "Q7" * 15
    noise = repeated(unit, MB)
    out = DEFAULT_REDACTOR.text(noise[:at] + " " + secret + " " + noise[at:])
    assert secret not in out


def test_the_url_password_shape_of_issue_17_is_scanned_in_bounded_windows() -> None:
    """The text that took 18 s at 400k characters (letters, dots, dashes) gets no window wider
    than a rule's and work proportional to its length."""
    text = repeated("ab.cd-ef.", MB)
    work = DEFAULT_REDACTOR.scan(text).work
    assert work.widest <= WIDEST
    assert work.chars <= 64 * len(text)
