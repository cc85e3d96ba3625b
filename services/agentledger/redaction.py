"""Secret redaction applied to every payload and message before an event is built (invariant 10).

A :class:`Redactor` holds ordered :class:`Rule` objects (a regular expression, an optional
validator such as the Luhn check, and which group to mask). :data:`DEFAULT_RULES` covers common
API keys (OpenAI/Anthropic ``sk-…``, AWS ``AKIA…``, GitHub ``ghp_…``, Slack ``xox…``, Stripe
``sk_live_…``, Google ``AIza…``), bearer tokens, JWTs, PEM private keys, passwords in URLs and
card numbers. JSON values are walked: strings are scanned, values under sensitive keys
(``password``, ``api_key``, ``authorization`` …) are masked whatever their shape, and integers that
are valid card numbers are masked too. Extend with ``Redactor(DEFAULT_RULES + (my_rule,))``.

Guarantee pinned by property tests: a secret of a covered shape that is not glued to letters or
digits on its left is never left in the output.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

MASK_TEMPLATE = "[REDACTED:{name}]"


def luhn_ok(digits: str) -> bool:
    """True when the digit string passes the Luhn checksum (every payment card number does)."""
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
    """Spans of ``text`` (digit groups joined by single spaces/dashes) that are card numbers.

    The regular expression finds 13-19 digits in groups; the card may be only some of the
    groups (a card followed by `` 0`` reads as 14 digits), so every run of consecutive groups is
    tried and the union of those that are card numbers is masked. A group is never split: a
    long number written without separators is one token and is a card only as a whole. Groups
    must be laid out as cards are written (fours, the last one shorter; 4-6-5 or 4-6-4), so a
    timestamp such as ``20261130-182409`` in an id is not taken for a card.
    """
    groups = [(m.start(), m.end()) for m in re.finditer(r"\d+", text)]
    covered: list[tuple[int, int]] = []
    for first in range(len(groups)):
        digits = ""
        for last in range(first, len(groups)):
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


@dataclass(frozen=True)
class Rule:
    """One secret shape: ``pattern`` finds it, ``group`` is the part masked, ``check`` confirms.

    ``spans`` (instead of masking the whole group) returns the parts of the group to mask.
    """

    name: str
    pattern: re.Pattern[str]
    group: int | str = 0
    check: Callable[[str], bool] | None = field(default=None, compare=False)
    spans: Callable[[str], list[tuple[int, int]]] | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        name: str,
        regex: str,
        *,
        group: int | str = 0,
        flags: int = 0,
        check: Callable[[str], bool] | None = None,
        spans: Callable[[str], list[tuple[int, int]]] | None = None,
    ) -> Rule:
        """Build a rule from a regular expression string."""
        return cls(name, re.compile(regex, flags), group, check, spans)


_LEFT = r"(?<![A-Za-z0-9])"

DEFAULT_RULES: tuple[Rule, ...] = (
    Rule.of(
        "private_key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY"
        r"[A-Z ]*-----|\Z)",
    ),
    Rule.of(
        "url_password", r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/?#@]*:(?P<pw>[^\s/?#]+)@", group="pw"
    ),
    Rule.of(
        "bearer_token",
        r"\bbearer\s+(?P<tok>[A-Za-z0-9\-._~+/]{8,}=*)",
        group="tok",
        flags=re.IGNORECASE,
    ),
    Rule.of(
        "basic_auth", r"\bbasic\s+(?P<tok>[A-Za-z0-9+/]{8,}=*)", group="tok", flags=re.IGNORECASE
    ),
    Rule.of("jwt", _LEFT + r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"),
    Rule.of("stripe_key", _LEFT + r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}"),
    Rule.of("openai_key", _LEFT + r"sk-[A-Za-z0-9_\-]{20,}"),
    Rule.of("aws_access_key_id", _LEFT + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}"),
    Rule.of(
        "aws_secret_access_key",
        r"(?i:aws_?secret_?access_?key|aws_?secret)[\"'\s:=]+(?P<sec>[A-Za-z0-9/+=]{40})",
        group="sec",
    ),
    Rule.of("github_token", _LEFT + r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    Rule.of("slack_token", _LEFT + r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
    Rule.of("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"),
    Rule.of("google_api_key", _LEFT + r"AIza[0-9A-Za-z_\-]{35}"),
    # The whole run of digit groups (13 digits or more): a card may start inside it, after
    # groups that are not part of it ("00 4307 4185 …"); card_spans finds it there.
    Rule.of("card_number", r"(?<!\d)\d(?:[ -]?\d){12,}", spans=card_spans),
)

#: Keys whose values are secrets whatever they look like (compared lower-cased, ``-`` as ``_``).
SENSITIVE_KEYS: frozenset[str] = frozenset(
    {
        "password",
        "passwd",
        "secret",
        "client_secret",
        "api_key",
        "apikey",
        "access_token",
        "refresh_token",
        "auth_token",
        "authorization",
        "private_key",
        "secret_key",
        "x_api_key",
        "cookie",
        "set_cookie",
        "card_number",
        "cvv",
        "cvc",
    }
)


@dataclass
class Redaction:
    """The redacted value and how many secrets of each rule were masked."""

    value: Any
    found: dict[str, int] = field(default_factory=dict)


class Redactor:
    """Masks secrets in text and JSON values; pure and thread-safe."""

    def __init__(
        self,
        rules: Iterable[Rule] = DEFAULT_RULES,
        *,
        sensitive_keys: Iterable[str] = SENSITIVE_KEYS,
        mask: str = MASK_TEMPLATE,
    ) -> None:
        self.rules = tuple(rules)
        self.sensitive_keys = frozenset(_norm_key(k) for k in sensitive_keys)
        self._mask = mask

    def text(self, value: str) -> str:
        """``value`` with every secret masked."""
        return self._text(value, {})

    def json(self, value: Any) -> Any:
        """A copy of the JSON value ``value`` with every secret masked."""
        return self._json(value, {})

    def redact(self, value: Any) -> Redaction:
        """Like :meth:`json`, also counting what was masked (for logs and tests)."""
        found: dict[str, int] = {}
        return Redaction(self._json(value, found), found)

    def _masked(self, name: str) -> str:
        return self._mask.format(name=name)

    def _text(self, value: str, found: dict[str, int]) -> str:
        for rule in self.rules:
            value = rule.pattern.sub(partial(self._replace, rule=rule, found=found), value)
        return value

    def _replace(self, match: re.Match[str], *, rule: Rule, found: dict[str, int]) -> str:
        whole = match.group(0)
        secret = match.group(rule.group)
        if secret is None or (rule.check is not None and not rule.check(secret)):
            return whole
        offset = match.start(rule.group) - match.start(0)
        parts = [(0, len(secret))] if rule.spans is None else rule.spans(secret)
        for start, end in reversed(parts):
            found[rule.name] = found.get(rule.name, 0) + 1
            a, b = offset + start, offset + end
            whole = whole[:a] + self._masked(rule.name) + whole[b:]
        return whole

    def _json(self, value: Any, found: dict[str, int]) -> Any:
        if isinstance(value, str):
            return self._text(value, found)
        if isinstance(value, bool) or value is None or isinstance(value, float):
            return value
        if isinstance(value, int):
            return self._int(value, found)
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                name = self._text(key, found) if isinstance(key, str) else key
                if isinstance(key, str) and _norm_key(key) in self.sensitive_keys and item:
                    found["sensitive_key"] = found.get("sensitive_key", 0) + 1
                    out[name] = self._masked("sensitive_key")
                else:
                    out[name] = self._json(item, found)
            return out
        if isinstance(value, list | tuple):
            return [self._json(item, found) for item in value]
        return value

    def _int(self, value: int, found: dict[str, int]) -> Any:
        if card_like(str(abs(value))):
            found["card_number"] = found.get("card_number", 0) + 1
            return self._masked("card_number")
        return value


def _norm_key(key: str) -> str:
    return key.strip().lower().replace("-", "_")


DEFAULT_REDACTOR = Redactor()
