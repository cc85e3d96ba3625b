"""Secret redaction applied to every payload and message before an event is built (invariant 10).

A :class:`Redactor` holds ordered :class:`Rule` objects (where a secret can start, its shape, an
optional validator such as the Luhn check, and which part to mask). :data:`DEFAULT_RULES` covers
common API keys (OpenAI/Anthropic ``sk-…``, AWS ``AKIA…``, GitHub ``ghp_…``, Slack ``xox…``,
Stripe ``sk_live_…`` and ``whsec_…``, Google ``AIza…``, npm ``npm_…``, Hugging Face ``hf_…``),
bearer tokens, JWTs, PEM private keys, passwords in URLs, secrets assigned in free text or query
strings (``api_key=…``, ``X-Api-Key: …``, ``?password=…``) and card numbers. JSON values are
walked: strings are scanned, values under sensitive keys (``password``, ``clientSecret``,
``*_token`` …) are masked whatever their shape, and numbers that are card numbers are masked too.
Extend with ``Redactor(DEFAULT_RULES + (my_rule,))``.

Every rule finds its secrets in time linear in the text (see :mod:`agentledger.redaction.scan`):
redaction runs on the worker's event loop, so a step's output must never stall it.

Guarantee pinned by property tests: a secret of a covered shape that is not glued to letters or
digits on its left is never left in the output.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agentledger.redaction.cards import card_layout, card_like, card_spans, luhn_ok
from agentledger.redaction.rules import DEFAULT_RULES, Rule, hint_chars, present_chars
from agentledger.redaction.scan import Lit, Run, Work

__all__ = [
    "DEFAULT_REDACTOR",
    "DEFAULT_RULES",
    "MASK_TEMPLATE",
    "SENSITIVE_KEYS",
    "SENSITIVE_SUFFIXES",
    "Lit",
    "Redaction",
    "Redactor",
    "Rule",
    "Run",
    "Scan",
    "Work",
    "card_layout",
    "card_like",
    "card_spans",
    "luhn_ok",
    "redacted_url",
]

MASK_TEMPLATE = "[REDACTED:{name}]"
#: Texts up to this long are remembered with what their scan found: keys and short values
#: (``role``, a run id, an effect's kind) come again in every step's payloads.
SHORT_TEXT = 128
#: How many short texts a redactor remembers (it forgets them all when full).
SHORT_TEXTS_KEPT = 4096

#: Texts at least this long are first passed over once for the characters of every rule's
#: hint words (measured: below it the word searches alone cost less).
PRESENCE_FROM = 160

#: Keys whose values are secrets whatever they look like. Keys are compared by their last dotted
#: segment, lower-cased, without separators: ``clientSecret``, ``client-secret`` and
#: ``client_secret`` are one key, and ``credentials.pass`` is ``pass``.
SENSITIVE_KEYS: frozenset[str] = frozenset(
    {
        "password",
        "passwd",
        "pass",
        "pwd",
        "passphrase",
        "secret",
        "client_secret",
        "api_key",
        "api_token",
        "token",
        "access_token",
        "refresh_token",
        "auth_token",
        "session_token",
        "id_token",
        "authorization",
        "credentials",
        "private_key",
        "private_key_id",
        "secret_key",
        "secret_access_key",
        "x_api_key",
        "cookie",
        "set_cookie",
        "card_number",
        "cvv",
        "cvc",
    }
)

#: Endings that make a key sensitive too (``aws_secret_access_key``, ``webhook_secret`` …).
SENSITIVE_SUFFIXES: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "privatekey",
    "secretkey",
    "accesskey",
)


@dataclass
class Redaction:
    """The redacted value and how many secrets of each rule were masked."""

    value: Any
    found: dict[str, int] = field(default_factory=dict)


@dataclass
class Scan:
    """What one text's scan found: the masked spans with their rule's name, and its work."""

    spans: list[tuple[int, int, str]]
    work: Work


class Redactor:
    """Masks secrets in text and JSON values; pure and thread-safe."""

    def __init__(
        self,
        rules: Iterable[Rule] = DEFAULT_RULES,
        *,
        sensitive_keys: Iterable[str] = SENSITIVE_KEYS,
        sensitive_suffixes: Iterable[str] = SENSITIVE_SUFFIXES,
        mask: str = MASK_TEMPLATE,
    ) -> None:
        self.rules = tuple(rules)
        self.sensitive_keys = frozenset(_norm_key(k) for k in sensitive_keys)
        self.sensitive_suffixes = tuple(_norm_key(k) for k in sensitive_suffixes)
        self._mask = mask
        # the characters of every hint word searched in lower-cased text, and in the text as is
        self._folded_chars = hint_chars(self.rules, folds=True)
        self._plain_chars = hint_chars(self.rules, folds=False)
        # short text -> (the text masked, how often it masked each rule name); the redactor is
        # pure, so a text's result never changes
        self._short: dict[str, tuple[str, tuple[tuple[str, int], ...]]] = {}
        # each rule with what Rule.may_hold reads of it, for the scan's inlined check
        self._gates = tuple(
            (index, rule, rule.hint, rule.hint_folds, rule.word_chars, rule.needs)
            for index, rule in enumerate(self.rules)
        )
        # key -> whether it is sensitive: a payload's keys come again in every step, and
        # normalising one (a regular expression's substitution) costs more than the lookup
        self._keys: dict[str, bool] = {}
        # short key (exactly a str) -> (the key masked, what masking it found, whether its
        # value is masked whatever it is): one lookup a key of a payload, for the walk of
        # plain dicts in _json (bounded like the short texts)
        self._key_info: dict[str, tuple[str, tuple[tuple[str, int], ...], bool]] = {}
        self._sensitive_mask = self._masked("sensitive_key")

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

    def scan(self, value: str) -> Scan:
        """The spans of ``value`` that are masked (overlaps merged, the earlier rule naming
        them) and the work the scan took."""
        work = Work()
        found: list[tuple[int, int, int]] = []
        lowered = value.lower() if value.isascii() else None  # once for every folding hint
        # one pass for every rule's hint words: which of their characters the text holds (in
        # a short text the word searches cost less than the pass)
        plain: set[str] | None = None
        folded: set[str] | None = None
        if len(value) >= PRESENCE_FROM:
            plain = present_chars(self._plain_chars, value)
            if lowered is not None:
                folded = present_chars(self._folded_chars, lowered)
        # Rule.may_hold of every rule, inlined (three calls a rule cost more than the word
        # searches in a short text): the same searches, and the same work, added once
        read = 0
        for index, rule, hint, folds, words, needs in self._gates:
            text = None if hint is None else lowered if folds else value
            if text is not None:  # a hint to search (a folding one only in ASCII text)
                present = folded if folds else plain
                read += len(text)
                if words:
                    for word, chars in words:
                        if (present is None or chars <= present) and word in text:
                            break
                    else:
                        continue
                elif hint is not None and hint.search(text) is None:
                    continue
            if needs is not None and needs not in value:
                read += len(value)  # what the finder records when it finds nothing
                continue
            found.extend(
                (begin, end, index) for begin, end in rule.find_anywhere(value, work) if end > begin
            )
        work.linear(read)
        return Scan(self._merged(found), work)

    def _merged(self, found: list[tuple[int, int, int]]) -> list[tuple[int, int, str]]:
        """The spans found (with their rule's index), in order, overlaps merged, the earlier
        span's rule naming them."""
        spans: list[tuple[int, int, str]] = []
        for begin, end, index in sorted(found):
            if spans and begin < spans[-1][1]:
                spans[-1] = (spans[-1][0], max(spans[-1][1], end), spans[-1][2])
            else:
                spans.append((begin, end, self.rules[index].name))
        return spans

    def sensitive(self, key: str) -> bool:
        """True when values under ``key`` are masked whatever they look like."""
        known = self._keys.get(key)
        if known is None:
            norm = _norm_key(key)
            known = norm in self.sensitive_keys or norm.endswith(self.sensitive_suffixes)
            if len(self._keys) >= SHORT_TEXTS_KEPT:
                self._keys.clear()
            self._keys[key] = known
        return known

    def _masked(self, name: str) -> str:
        return self._mask.format(name=name)

    def _text(self, value: str, found: dict[str, int]) -> str:
        if not value:
            return value
        if len(value) > SHORT_TEXT:
            return self._masked_text(value, found)
        known = self._short.get(value)
        if known is None:
            names: dict[str, int] = {}  # a plain dict: a Counter cost ~1 us more a text
            known = (self._masked_text(value, names), tuple(names.items()))
            if len(self._short) >= SHORT_TEXTS_KEPT:
                self._short.clear()
            self._short[value] = known
        for name, n in known[1]:
            found[name] = found.get(name, 0) + n
        return known[0]

    def _masked_text(self, value: str, found: dict[str, int]) -> str:
        spans = self.scan(value).spans
        if not spans:
            return value
        parts: list[str] = []
        at = 0
        for begin, end, name in spans:
            found[name] = found.get(name, 0) + 1
            parts += (value[at:begin], self._masked(name))
            at = end
        parts.append(value[at:])
        return "".join(parts)

    def _json(self, value: Any, found: dict[str, int]) -> Any:
        # values of exactly the built-in JSON types (nearly every payload) by their type, one
        # comparison each; anything else (a subclass, a tuple, another Mapping, a float) as the
        # general walk has it: the same branches, the same results and counts
        kind = type(value)
        if kind is str:
            return self._text(value, found)
        if kind is dict:
            return self._object(value, found)
        if kind is list:
            return [self._json(item, found) for item in value]
        if kind is int:
            # a card number has 13-19 digits: a smaller integer is never masked
            return value if -_CARD_FLOOR < value < _CARD_FLOOR else self._number(value, found)
        if kind is bool or value is None:
            return value
        return self._json_any(value, found)

    def _object(self, value: dict[Any, Any], found: dict[str, int]) -> dict[Any, Any]:
        """A plain dict, redacted: :meth:`_json_any`'s mapping branch, with what each str key
        stands for (its masked text, the masks found in it, its sensitivity) looked up once."""
        out: dict[Any, Any] = {}
        keys = self._key_info
        for key, item in value.items():
            if type(key) is not str:
                self._item(key, item, out, found)
                continue
            info = keys.get(key)
            if info is None:
                info = self._key_of(key)
            name, counts, sensitive = info
            for mask, n in counts:
                found[mask] = found.get(mask, 0) + n
            if sensitive and item and not isinstance(item, bool):
                found["sensitive_key"] = found.get("sensitive_key", 0) + 1
                out[name] = self._sensitive_mask
            else:
                out[name] = self._json(item, found)
        return out

    def _key_of(self, key: str) -> tuple[str, tuple[tuple[str, int], ...], bool]:
        """What ``key`` stands for in a payload (remembered when it is a short text)."""
        names: dict[str, int] = {}
        info = (self._text(key, names), tuple(names.items()), self.sensitive(key))
        if len(key) <= SHORT_TEXT:
            if len(self._key_info) >= SHORT_TEXTS_KEPT:
                self._key_info.clear()
            self._key_info[key] = info
        return info

    def _item(self, key: Any, item: Any, out: dict[Any, Any], found: dict[str, int]) -> None:
        """One item of a mapping into ``out``: its key's text redacted, its value masked under
        a sensitive key, else redacted."""
        name = self._text(key, found) if isinstance(key, str) else key
        if isinstance(key, str) and self.sensitive(key) and item and not isinstance(item, bool):
            found["sensitive_key"] = found.get("sensitive_key", 0) + 1
            out[name] = self._masked("sensitive_key")
        else:
            out[name] = self._json(item, found)

    def _json_any(self, value: Any, found: dict[str, int]) -> Any:
        """The general walk, by ``isinstance`` (subclasses of the JSON types, tuples, other
        Mappings, floats)."""
        if isinstance(value, str):
            return self._text(value, found)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            return self._number(value, found)
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                self._item(key, item, out, found)
            return out
        if isinstance(value, list | tuple):
            return [self._json(item, found) for item in value]
        return value

    def _number(self, value: float, found: dict[str, int]) -> Any:
        """A card number written as a JSON integer or a float with no fraction is masked."""
        whole = value if isinstance(value, int) else _whole(value)
        if whole is not None and card_like(str(abs(whole))):
            found["card_number"] = found.get("card_number", 0) + 1
            return self._masked("card_number")
        return value


def _whole(value: float) -> int | None:
    """The integer a float holds exactly (``4111111111111111.0``), if it is one."""
    if not math.isfinite(value) or not value.is_integer():
        return None
    return int(value)


#: Integers strictly between -this and this have at most 12 digits: never a card (13-19).
_CARD_FLOOR = 10**12

_SEPARATORS = re.compile(r"[^a-z0-9]")


def _norm_key(key: str) -> str:
    return _SEPARATORS.sub("", key.strip().rsplit(".", 1)[-1].lower())


_QUERY_SECRET = re.compile(r"(?i)(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key)")


def redacted_url(url: str) -> str:
    """``url`` without its password (``scheme://user:***@host``) nor secret query parameters
    (``?password=***``), for logs and error messages; never raises."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None:
            host = parts.hostname or ""
            netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
        query = "&".join(_masked_param(item) for item in parts.query.split("&"))
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:  # a malformed URL (bad port, bad IPv6): mask all that could be secret
        scheme, sep, _rest = url.partition("://")
        return f"{scheme}{sep}***" if sep else "***"


def _masked_param(item: str) -> str:
    name, sep, value = item.partition("=")
    if sep and value and _QUERY_SECRET.search(name):
        return f"{name}=***"
    return item


DEFAULT_REDACTOR = Redactor()
