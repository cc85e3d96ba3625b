"""Redaction: known secret shapes never survive, ordinary data does (invariant 10)."""

from __future__ import annotations

import json
import re
import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agentledger.redaction import DEFAULT_REDACTOR, Redactor, Rule, card_like, luhn_ok
from agentledger.redaction.cards import card_spans
from agentledger.redaction.rules import _cards_in, card_numbers
from agentledger.redaction.scan import Work

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits


def _luhn_complete(body: str) -> str:
    """Append the check digit that makes ``body`` pass Luhn."""
    for digit in "0123456789":
        if luhn_ok(body + digit):
            return body + digit
    raise AssertionError("unreachable")


def _card(prefix: str, length: int, sep: str) -> str:
    rest = "".join(str((i * 7 + 3) % 10) for i in range(length - len(prefix) - 1))
    digits = _luhn_complete(prefix + rest)
    return sep.join(digits[i : i + 4] for i in range(0, len(digits), 4))


cards = st.builds(
    lambda prefix, length, tail, sep: _card(prefix + tail, length, sep),
    st.sampled_from(["4", "51", "55", "34", "37", "6011", "35", "2221"]),
    st.integers(13, 19),
    st.text("0123456789", max_size=3),
    st.sampled_from(["", " ", "-"]),
)
secrets = st.one_of(
    st.builds(lambda s: "sk-" + s, st.text(ALNUM + "_-", min_size=20, max_size=60)),
    st.builds(lambda s: "sk-proj-" + s, st.text(ALNUM, min_size=20, max_size=60)),
    st.builds(lambda s: "sk-ant-api03-" + s, st.text(ALNUM, min_size=20, max_size=60)),
    st.builds(
        lambda p, s: p + s,
        st.sampled_from(["AKIA", "ASIA"]),
        st.text(UPPER_DIGITS, min_size=16, max_size=16),
    ),
    st.builds(
        lambda p, s: p + s,
        st.sampled_from(["ghp_", "gho_", "ghs_"]),
        st.text(ALNUM, min_size=36, max_size=36),
    ),
    st.builds(lambda s: "github_pat_" + s, st.text(ALNUM + "_", min_size=22, max_size=82)),
    st.builds(
        lambda p, s: p + s,
        st.sampled_from(["xoxb-", "xoxp-", "xoxa-"]),
        st.text(ALNUM + "-", min_size=10, max_size=50),
    ),
    st.builds(
        lambda p, s: p + s,
        st.sampled_from(["sk_live_", "rk_live_", "sk_test_"]),
        st.text(ALNUM, min_size=24, max_size=99),
    ),
    st.builds(lambda s: "AIza" + s, st.text(ALNUM + "_-", min_size=35, max_size=35)),
    st.builds(
        lambda kind, lines: (
            f"-----BEGIN {kind}PRIVATE KEY-----\n"
            + "\n".join(lines)
            + f"\n-----END {kind}PRIVATE KEY-----"
        ),
        st.sampled_from(["", "RSA ", "EC ", "OPENSSH "]),
        st.lists(st.text(ALNUM + "+/=", min_size=16, max_size=64), min_size=1, max_size=4),
    ),
    cards,
)


def cores(secret: str) -> list[str]:
    """The parts of a secret that must not survive: a PEM key's body lines, else all of it."""
    if secret.startswith("-----BEGIN"):
        return secret.split("\n")[1:-1]
    return [secret]


# what surrounds a secret: anything, as long as the secret's left neighbour is not a letter or
# digit (``xsk-…`` is not an OpenAI key) and its right neighbour is not a digit (card numbers)
filler = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
separators = st.sampled_from([" ", "\n", '"', "'", "=", ":", "(", ",", "\t", "<", "/"])


@settings(max_examples=200)
@given(filler, separators, secrets, separators, filler)
def test_no_generated_secret_survives_in_text(
    left: str, sep1: str, secret: str, sep2: str, right: str
) -> None:
    """Any covered secret shape embedded in arbitrary text is masked."""
    text = left + sep1 + secret + sep2 + right
    redacted = DEFAULT_REDACTOR.text(text)
    for core in cores(secret):
        assume(core not in left + sep1 and core not in sep2 + right)  # filler is not the secret
        assert core not in redacted


@settings(max_examples=200)
@given(
    secrets,
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
        ),
        max_leaves=8,
    ),
)
def test_no_generated_secret_survives_in_json(secret: str, noise: object) -> None:
    """A secret anywhere in a JSON document (value, nested, list) is masked."""
    doc = {"noise": noise, "nested": {"list": ["x", f"token={secret}"]}, "plain": secret}
    redacted = DEFAULT_REDACTOR.json(doc)
    redacted.pop("noise")  # the noise may contain the key body by chance; it is not the secret
    for core in cores(secret):
        assert json.dumps(core)[1:-1] not in json.dumps(redacted)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("Authorization: Bearer abcdef0123456789.xyz", "bearer_token"),
        ("postgres://app:s3cr3t@db.internal:5432/app", "url_password"),
        ("redis://:hunter2@cache:6379/0", "url_password"),
        ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.sflKxwRJSMeKKF2QT4fwpM", "jwt"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "aws_secret_access_key",
        ),
        ("https://hooks.slack.com/services/T000/B000/XXXXXXXX", "slack_webhook"),
    ],
)
def test_each_default_rule_masks_its_shape(text: str, rule: str) -> None:
    """Every default rule recognises a realistic example of its shape."""
    result = DEFAULT_REDACTOR.redact(text)
    assert result.found.get(rule) == 1
    assert f"[REDACTED:{rule}]" in result.value


def test_url_password_keeps_user_and_host() -> None:
    """Only the password of a URL is masked; user and host stay readable."""
    out = DEFAULT_REDACTOR.text("postgres://app:p@ss@db:5432/x")
    assert out == "postgres://app:[REDACTED:url_password]@db:5432/x"


@pytest.mark.parametrize(
    "text",
    [
        "order 4111111111111112 is not a valid card (Luhn)",
        "created_at 1700000000000 and micros 1700000000000000",
        "task-abcdefghijklmnopqrstuvwxyz is a slug, not a key",
        "a token of appreciation was given",
        "refund 1200 EUR to customer 42",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    """Numbers that fail Luhn, timestamps, slugs and prose are not masked."""
    assert DEFAULT_REDACTOR.text(text) == text


def test_sensitive_keys_and_card_integers_are_masked() -> None:
    """Values under password-like keys and integer card numbers are masked whatever they are."""
    out = DEFAULT_REDACTOR.json(
        {"Password": "correct horse", "api-key": 123, "card": 4242424242424242, "n": 7}
    )
    assert out == {
        "Password": "[REDACTED:sensitive_key]",
        "api-key": "[REDACTED:sensitive_key]",
        "card": "[REDACTED:card_number]",
        "n": 7,
    }


def test_rules_are_extensible() -> None:
    """A project can add its own shapes to the defaults."""
    mine = Redactor((*DEFAULT_REDACTOR.rules, Rule.of("internal", r"INT-[0-9]{6}")))
    assert mine.text("ticket INT-123456") == "ticket [REDACTED:internal]"
    assert DEFAULT_REDACTOR.text("ticket INT-123456") == "ticket INT-123456"


def test_masks_contain_no_digits_so_rules_cannot_cascade() -> None:
    """A mask never looks like a secret to a later rule."""
    masked = DEFAULT_REDACTOR.text("sk-" + "a" * 30 + " 4242 4242 4242 4242")
    assert masked == "[REDACTED:openai_key] [REDACTED:card_number]"
    assert not re.search(r"\d", masked)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x 4307418529637 0", "x [REDACTED:card_number] 0"),
        ("2 4307418529637", "2 [REDACTED:card_number]"),
        ("4111-1111-1111-1111 12", "[REDACTED:card_number] 12"),
        ("00 4307 4185 2963 0741 89 ", "00 [REDACTED:card_number] "),
        ("3782 822463 10005 x", "[REDACTED:card_number] x"),
    ],
)
def test_card_number_next_to_other_digit_groups_is_still_masked(text: str, expected: str) -> None:
    """A card is found among neighbouring digit groups; the neighbours stay readable."""
    assert DEFAULT_REDACTOR.text(text) == expected


def test_timestamps_in_ids_are_not_taken_for_card_numbers() -> None:
    """Digit groups laid out unlike a card (a date and time in a run id) stay readable even
    when their digits pass Luhn, as 20261130182409 does."""
    assert card_like("20261130182409")
    text = "ord-demo-20261130-182409-dc88-000"
    assert DEFAULT_REDACTOR.text(text) == text


HINT_PIECES = [
    "sk-", "sk_live_", "rk_test_", "AKIA", "ghp_", "github_pat_", "xoxb-", "AIza", "whsec_",
    "npm_", "hf_", "eyJ", "Bearer ", "BASIC ", "AWS_SECRET", "Password", "apiKey", "x", "9",
    " ", "_", "-", "=", ":", "\u212a", "\u017f",
]  # fmt: skip


@settings(max_examples=300)
@given(st.lists(st.sampled_from(HINT_PIECES), max_size=8).map("".join))
def test_a_rules_hint_is_found_wherever_its_anchor_matches(text: str) -> None:
    """Every default rule's hint is in any text its anchor matches (lower-cased for a hint that
    folds, in ASCII text), so passing over a text without the hint never misses a secret."""
    for rule in DEFAULT_REDACTOR.rules:
        if rule.hint is None or rule.anchor is None or rule.anchor.search(text) is None:
            continue
        if rule.hint_folds and not text.isascii():
            continue
        searched = text.lower() if rule.hint_folds else text
        assert rule.hint.search(searched) is not None, (rule.name, text)


@settings(max_examples=300)
@given(st.lists(st.sampled_from(HINT_PIECES), max_size=8).map("".join))
def test_a_rules_hint_words_are_in_every_text_its_hint_is_found_in(text: str) -> None:
    """A rule's hint words (looked for with ``in``) are found wherever its hint is, so they
    pass over no text the hint would have scanned."""
    for rule in DEFAULT_REDACTOR.rules:
        if rule.hint is None or not rule.hint_words:
            continue
        if rule.hint_folds and not text.isascii():
            continue
        searched = text.lower() if rule.hint_folds else text
        if rule.hint.search(searched) is not None:
            assert any(word in searched for word in rule.hint_words), (rule.name, text)


CARD_PIECES = [
    "4111 1111 1111 1111", "4111-1111-1111-1111", "378282246310005", "0", "12", "1234",
    " ", ".", "-", "  ", "a", "f", "\u00a0", "\u0663", "x",
]  # fmt: skip


@settings(max_examples=300)
@given(st.lists(st.sampled_from(CARD_PIECES), max_size=10).map("".join))
def test_card_numbers_in_ascii_text_are_the_ones_a_whole_text_scan_finds(text: str) -> None:
    """Searching only the stretches of digits and separators of an ASCII text finds exactly the
    cards that scanning the whole text finds."""
    assert list(card_numbers(text, Work())) == list(_cards_in(text, 0, Work()))


def test_a_remembered_short_text_is_counted_each_time_it_is_masked() -> None:
    """A short text masked once and met again is masked again and counted again."""
    secret = "sk-" + "Q7" * 15
    redactor = Redactor()
    first = redactor.redact({"a": secret})
    again = redactor.redact({"a": secret, "b": secret, "c": "plain"})
    assert first.found == {"openai_key": 1}
    assert again.found == {"openai_key": 2}
    assert again.value == {"a": "[REDACTED:openai_key]", "b": "[REDACTED:openai_key]", "c": "plain"}


def _cards_at_every_digit(text: str) -> list[tuple[int, int]]:
    """The card spans found by an attempt at every run of digit groups (the walk the card rule
    made before it searched for runs of 13 digits)."""
    run_of = re.compile(r"\d(?:[ \u00a0\u2007\u202f.\-]{0,2}+\d)*+")
    spans: list[tuple[int, int]] = []
    pos = 0
    while (start := re.compile(r"(?<!\d)\d").search(text, pos)) is not None:
        run = run_of.match(text, start.start())
        assert run is not None
        if sum(c.isdigit() for c in run.group()) >= 13:
            spans += [(run.start() + a, run.start() + b) for a, b in card_spans(run.group())]
        pos = run.end()
    return spans


@settings(max_examples=400)
@given(
    st.lists(
        st.sampled_from(
            ["4111", "1111", "4", "12", "0", " ", "  ", "   ", "-", ".", "x", "\u00a0"]
        ),
        max_size=24,
    ).map("".join)
)
def test_the_card_rule_finds_what_an_attempt_at_every_digit_run_finds(text: str) -> None:
    """Searching for runs of 13 digits finds the same card spans as attempting every run."""
    assert list(card_numbers(text, Work())) == _cards_at_every_digit(text)
