"""Payment card numbers: the Luhn check, the networks' ranges and how cards are grouped."""

from __future__ import annotations

import re

#: At most this many digit groups make one card (19 digits as 4+4+4+4+3).
MAX_GROUPS = 5


#: An ASCII digit's value, and the Luhn value of the doubled digit, as bytes (for translate).
_VALUE = bytes.maketrans(b"0123456789", bytes(range(10)))
_DOUBLED = bytes.maketrans(b"0123456789", bytes((0, 2, 4, 6, 8, 1, 3, 5, 7, 9)))


def luhn_ok(digits: str) -> bool:
    """True when the digit string passes the Luhn checksum (every payment card number does)."""
    if digits.isascii() and digits.isdigit():
        # every other digit from the last as it is, the others doubled (less 9 above 9):
        # summed at C speed; any other text (Unicode digits) takes the loop below
        data = digits.encode("ascii")
        return (
            sum(data[-1::-2].translate(_VALUE)) + sum(data[-2::-2].translate(_DOUBLED))
        ) % 10 == 0
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2 == 1:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def card_like(digits: str) -> bool:
    """True for 13-19 digits starting 2-6 (the card networks' ranges) that pass Luhn.

    The leading-digit range keeps epoch timestamps (which start with 1 until 2033) intact.
    """
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_ok(digits)


def card_layout(sizes: list[int]) -> bool:
    """True for how card numbers are grouped: one group, fours with a shorter last one, or the
    4-6-5 / 4-6-4 layouts of 15- and 14-digit cards."""
    if len(sizes) == 1 or sizes in ([4, 6, 5], [4, 6, 4]):
        return True
    return all(size == 4 for size in sizes[:-1]) and 1 <= sizes[-1] <= 4


def card_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` (digit groups joined by separators) that are card numbers.

    The card may be only some of the groups (a card followed by `` 0`` reads as 14 digits), so
    every run of up to :data:`MAX_GROUPS` consecutive groups is tried and the union of those
    that are card numbers is masked. A group is never split: a long number written without
    separators is one token and is a card only as a whole. Groups must be laid out as cards are
    written (fours, the last one shorter; 4-6-5 or 4-6-4), so a timestamp such as
    ``20261130-182409`` in an id is not taken for a card. Linear in the number of groups.
    """
    if text.isdecimal():  # one group (``\d`` is a decimal digit): a card only as a whole
        return [(0, len(text))] if card_like(text) else []
    groups = [(m.start(), m.end()) for m in re.finditer(r"\d+", text)]
    covered: list[tuple[int, int]] = []
    for first in range(len(groups)):
        if groups[first][1] - groups[first][0] not in (4, *range(13, 20)):
            continue  # every layout of two groups or more starts with four digits
        digits = ""
        for last in range(first, min(first + MAX_GROUPS, len(groups))):
            digits += text[groups[last][0] : groups[last][1]]
            if len(digits) > 19:
                break
            sizes = [end - begin for begin, end in groups[first : last + 1]]
            if card_layout(sizes) and card_like(digits):
                covered.append((groups[first][0], groups[last][1]))
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(covered):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((begin, end))
    return merged
