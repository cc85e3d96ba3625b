"""The card rule's fast paths (an ASCII Luhn sum at C speed, a run of one group taken whole)
answer what the walk they shortcut answered."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger.redaction.cards import MAX_GROUPS, card_layout, card_spans, luhn_ok


def reference_luhn(digits: str) -> bool:
    """``luhn_ok`` before session 15: one loop over every character."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def reference_card_spans(text: str) -> list[tuple[int, int]]:
    """``card_spans`` before session 15: every text through the walk of its groups."""
    groups = [(m.start(), m.end()) for m in re.finditer(r"\d+", text)]
    covered: list[tuple[int, int]] = []
    for first in range(len(groups)):
        if groups[first][1] - groups[first][0] not in (4, *range(13, 20)):
            continue
        digits = ""
        for last in range(first, min(first + MAX_GROUPS, len(groups))):
            digits += text[groups[last][0] : groups[last][1]]
            if len(digits) > 19:
                break
            sizes = [end - begin for begin, end in groups[first : last + 1]]
            if card_layout(sizes) and card_like_reference(digits):
                covered.append((groups[first][0], groups[last][1]))
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(covered):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((begin, end))
    return merged


def card_like_reference(digits: str) -> bool:
    """``card_like`` with the reference checksum."""
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and reference_luhn(digits)


#: ASCII digits, Unicode decimal digits (Arabic-Indic, Devanagari, fullwidth), other digits
#: that are not decimal (superscript two), the card separators and letters.
ALPHABET = "0123456789" * 3 + "\u0663\u0967\uff14\u00b2 .-\u00a0x"
digit_texts = st.text(alphabet="0123456789", min_size=0, max_size=24) | st.text(
    alphabet=ALPHABET, min_size=0, max_size=24
)
cards = st.sampled_from(["4111111111111111", "378282246310005", "5555555555554444"])


@settings(max_examples=600, deadline=None)
@given(digit_texts)
def test_luhn_answers_what_the_loop_answered(digits: str) -> None:
    """The checksum of any text, ASCII digits or not, is the loop's."""
    assert luhn_ok(digits) is reference_luhn(digits)


@settings(max_examples=600, deadline=None)
@given(st.one_of(digit_texts, cards, st.tuples(cards, digit_texts).map("".join)))
def test_card_spans_are_the_walks_spans(text: str) -> None:
    """A run of one group, of several, or any other text, gives the walk's spans."""
    assert card_spans(text) == reference_card_spans(text)
