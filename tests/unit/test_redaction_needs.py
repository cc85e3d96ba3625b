"""A finder's ``needs`` literal is what its own first check reads: a text without it is
recorded as one linear read and has nothing of the rule, so a scan may skip the call."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.redaction import DEFAULT_RULES
from agentledger.redaction.scan import Work
from tests.unit.test_redaction_presence import long_texts

NEEDY = [rule for rule in DEFAULT_RULES if rule.needs is not None]


def test_the_default_rules_without_an_anchor_literal_have_no_needs() -> None:
    """The PEM key and URL password finders name their anchors; the card finder (digits, no
    literal) and the anchored rules name none."""
    assert [(r.name, r.needs) for r in NEEDY] == [
        ("private_key", "-----BEGIN"),
        ("url_password", "://"),
    ]


@settings(max_examples=400, deadline=None)
@given(long_texts)
def test_a_text_without_the_literal_is_one_linear_read_and_holds_nothing(text: str) -> None:
    """Without a rule's ``needs`` the finder finds nothing and records exactly the text's
    length, which is what the scan records in its place."""
    for rule in NEEDY:
        assert rule.needs is not None
        if rule.needs in text:
            continue
        work = Work()
        assert list(rule.find_anywhere(text, work)) == []
        assert work == Work(chars=len(text))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["-----BEGIN RSA PRIVATE KEY-----\nMIIB\n", "https://u:pw@h/"]), long_texts)
def test_a_text_with_the_literal_is_still_searched(secret: str, text: str) -> None:
    """With the literal, the finder is called and finds the secret that holds it."""
    for rule in NEEDY:
        assert rule.needs is not None
        value = f"{text} {secret}"
        if rule.needs in secret:
            assert list(rule.find_anywhere(value, Work()))
