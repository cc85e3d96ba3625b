"""The secret shapes agentledger masks by default, each found in linear time (see ``scan``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

from agentledger.redaction.cards import card_spans
from agentledger.redaction.scan import Finder, Hit, Lit, Run, Span, Step, Work, drive, read_tail

#: Characters a window of a default rule's head may span (its failed attempts cost at most this).
WINDOW = 64


@dataclass(frozen=True)
class Rule:
    """One secret shape: where it can start, what it looks like, which part of it is masked.

    ``pattern`` is matched at each position ``anchor`` finds (a pattern without repeats), within
    ``window`` characters; ``tail`` (possessive runs and literals) then reads the rest of the
    secret, however long. ``group`` is the masked part (it runs to the tail's end when there is a
    tail), ``check`` confirms it, ``spans`` picks the parts of it to mask. A ``finder`` replaces
    all of that for shapes a head cannot express. A rule without an anchor (a project's own, from
    :meth:`of`) is searched over the whole text, without the linear-time guarantee.
    """

    name: str
    pattern: re.Pattern[str]
    group: int | str = 0
    check: Callable[[str], bool] | None = field(default=None, compare=False)
    spans: Callable[[str], list[Span]] | None = field(default=None, compare=False)
    anchor: re.Pattern[str] | None = None
    window: int = WINDOW
    tail: tuple[Step, ...] = ()
    finder: Finder | None = field(default=None, compare=False)
    #: A pattern wherever the anchor matches (the anchor without its left context): a text it is
    #: not found in is passed over with one fast search, instead of an anchor search that cannot
    #: skip ahead. ``hint_folds``: the hint is the lower case of a case-insensitive anchor; it is
    #: searched in the lower-cased text, and only in ASCII text (where lower-casing is exactly
    #: what IGNORECASE compares; other text is scanned without the hint).
    hint: re.Pattern[str] | None = None
    hint_folds: bool = False
    #: Plain strings one of which is in every text the hint is found in: looked for with ``in``
    #: instead of the hint's search (a search of an alternation pays an attempt per character).
    hint_words: tuple[str, ...] = ()
    #: Each hint word with the set of its characters: a word is in a text only if all of them
    #: are, which one ``in`` per character (a C ``memchr``) tells before the word's search.
    word_chars: tuple[tuple[str, frozenset[str]], ...] = field(
        init=False, compare=False, repr=False
    )
    #: For a ``finder``: a literal that every text it finds anything in holds, and whose
    #: absence it checks first, recording ``Work.linear(len(text))`` and finding nothing. A
    #: scan then records that itself, without calling the finder (see :func:`custom`).
    needs: str | None = None

    def __post_init__(self) -> None:
        words = tuple((word, frozenset(word)) for word in self.hint_words)
        object.__setattr__(self, "word_chars", words)

    @classmethod
    def of(
        cls,
        name: str,
        regex: str,
        *,
        group: int | str = 0,
        flags: int = 0,
        check: Callable[[str], bool] | None = None,
        spans: Callable[[str], list[Span]] | None = None,
        anchor: str | None = None,
        window: int = WINDOW,
        tail: tuple[Step, ...] = (),
        hint: str | None = None,
        hint_folds: bool = False,
        hint_words: tuple[str, ...] | None = None,
    ) -> Rule:
        """Build a rule from regular expression strings (``anchor`` and a hint that does not
        fold take the same ``flags``). A hint that is a plain word is its own ``hint_words``."""
        start = None if anchor is None else re.compile(anchor, flags)
        hinted = None if hint is None else re.compile(hint, 0 if hint_folds else flags)
        return cls(
            name,
            re.compile(regex, flags),
            group,
            check,
            spans,
            start,
            window,
            tail,
            hint=hinted,
            hint_folds=hint_folds,
            hint_words=(
                hint_words
                if hint_words is not None
                else _words_of(hint, folds=hint_folds or not flags & re.IGNORECASE)
            ),
        )

    def find(self, text: str, work: Work) -> Iterator[Span]:
        """The spans of ``text`` this rule masks, in order."""
        lowered = text.lower() if self.hint_folds and text.isascii() else None
        if not self.may_hold(text, lowered, work):
            return iter(())
        return self.find_anywhere(text, work)

    def find_anywhere(self, text: str, work: Work) -> Iterator[Span]:
        """:meth:`find` without the hint's check (the caller made it: :meth:`may_hold`)."""
        if self.finder is not None:
            yield from self.finder(text, work)
        elif self.anchor is None:
            work.unbounded += 1
            work.linear(len(text))
            for match in self.pattern.finditer(text):
                if match.group(self.group) is not None:
                    yield from self._masks(text, match.start(self.group), match.end(self.group))
        else:
            yield from drive(self.anchor, text, work, partial(self._attempt, text, work))

    def may_hold(
        self,
        text: str,
        lowered: str | None,
        work: Work,
        present: frozenset[str] | set[str] | None = None,
    ) -> bool:
        """False when the hint proves ``text`` holds nothing of this rule; ``lowered`` is the
        text lower-cased when it is ASCII (None otherwise), shared by every rule of a scan.
        ``present``, when given, holds every character of this rule's hint words that is in
        the text the hint is searched in (``lowered`` for a folding hint): a word with a
        character outside it is not searched for (see :func:`present_chars`)."""
        if self.hint is None:
            return True
        if self.hint_folds:
            if lowered is None:
                return True
            text = lowered
        work.linear(len(text))
        if self.hint_words:
            return self._has_word(text, present)
        return self.hint.search(text) is not None

    def _has_word(self, text: str, present: frozenset[str] | set[str] | None) -> bool:
        """True when one of the hint words is in ``text`` (a word with a character that
        ``present`` lacks is not searched for)."""
        if present is None:
            for word in self.hint_words:  # noqa: SIM110 - no generator per call: a hot path
                if word in text:
                    return True
            return False
        for word, chars in self.word_chars:  # noqa: SIM110 - no generator per call: a hot path
            if chars <= present and word in text:
                return True
        return False

    def _attempt(self, text: str, work: Work, pos: int) -> Hit | None:
        end = min(len(text), pos + self.window)
        work.bounded(end - pos)
        match = self.pattern.match(text, pos, end)
        if match is None or match.group(self.group) is None:
            return None
        stop = match.end(self.group)
        if self.tail:
            tail_end = read_tail(self.tail, text, match.end(), work)
            if tail_end is None:
                return None
            stop = tail_end
        return self._masks(text, match.start(self.group), stop), max(stop, match.end(), pos + 1)

    def _masks(self, text: str, begin: int, end: int) -> list[Span]:
        secret = text[begin:end]
        if self.check is not None and not self.check(secret):
            return []
        if self.spans is None:
            return [(begin, end)]
        return [(begin + a, begin + b) for a, b in self.spans(secret)]


def hint_chars(rules: tuple[Rule, ...], *, folds: bool) -> str:
    """Every character of the hint words of ``rules`` whose hint folds (or does not)."""
    return "".join(
        sorted({c for rule in rules if rule.hint_folds is folds for c in "".join(rule.hint_words)})
    )


def present_chars(chars: str, text: str) -> set[str]:
    """The characters of ``chars`` that ``text`` holds: one C search (``memchr``) each, the
    combined prefilter of every rule's hint words (a word is in a text only if all its
    characters are; the word searches are slower, most of all in text such as hex ids, where
    almost every character starts a partial match)."""
    return {c for c in chars if c in text}


_PLAIN_WORD = re.compile(r"[A-Za-z0-9_\-]+")


def _words_of(hint: str | None, *, folds: bool) -> tuple[str, ...]:
    """``(hint,)`` for a hint that is a plain word (letters, digits, ``_``, ``-``) searched as
    written (``folds``: in lower-cased text, or without IGNORECASE), else ()."""
    if hint is None or not folds or not _PLAIN_WORD.fullmatch(hint):
        return ()
    return (hint,)


def custom(name: str, finder: Finder, *, needs: str | None = None) -> Rule:
    """A rule whose spans ``finder`` computes (in linear time, recording its work). ``needs``:
    a literal without which ``finder`` records ``Work.linear(len(text))`` and finds nothing,
    checked first (a scan then skips the call: a generator and its first step, ~1 us)."""
    return Rule(name, re.compile(""), finder=finder, needs=needs)


# --- finders for the shapes a bounded head cannot express -------------------------------

_PEM_HEAD = re.compile(r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,20}-----")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,20}-----")
_PEM_WINDOW = 80
_PEM_NEEDS = "-----BEGIN"  # the anchor, and the rule's ``needs``


def _pem_end(text: str, pos: int, work: Work) -> int:
    """Where the PEM block whose body starts at ``pos`` ends (the end of the text without one)."""
    while True:
        found = text.find("-----END", pos)
        work.linear((len(text) if found < 0 else found) - pos)
        if found < 0:
            return len(text)
        work.bounded(min(_PEM_WINDOW, len(text) - found))
        closing = _PEM_END.match(text, found, found + _PEM_WINDOW)
        if closing is not None:
            return closing.end()
        pos = found + 1


def private_keys(text: str, work: Work) -> Iterator[Span]:
    """PEM private key blocks, header to footer (or to the end of a cut-off text)."""
    if _PEM_NEEDS not in text:  # the anchor, found at C speed
        work.linear(len(text))
        return

    def attempt(pos: int) -> Hit | None:
        work.bounded(min(_PEM_WINDOW, len(text) - pos))
        head = _PEM_HEAD.match(text, pos, pos + _PEM_WINDOW)
        if head is None:
            return None
        end = _pem_end(text, head.end(), work)
        return [(pos, end)], end

    yield from drive(re.compile(_PEM_NEEDS), text, work, attempt)


_SCHEME_CHAR = re.compile(r"[A-Za-z0-9+.\-]")
_USERINFO = Run(r"^\s/?#")
_URL_NEEDS = "://"  # the anchor, and the rule's ``needs``


def url_passwords(text: str, work: Work) -> Iterator[Span]:
    """The password of ``scheme://user:password@host``: after the first ``:`` of the userinfo
    (the user has neither ``:`` nor ``@``), up to its last ``@``."""
    if _URL_NEEDS not in text:  # the anchor, found at C speed
        work.linear(len(text))
        return

    def attempt(pos: int) -> Hit | None:
        if pos == 0 or not _SCHEME_CHAR.fullmatch(text[pos - 1]):
            return None
        start = pos + 3
        end = _USERINFO.read(text, start, work)
        if end is None:  # a run with no minimum always reads; this keeps mypy informed
            return None
        work.linear(3 * (end - start))  # the three searches below
        colon = text.find(":", start, end)
        first_at = text.find("@", start, end)
        # resume at end - 1: the next "://" may begin with the ':' before the '/' that ended it
        resume = max(pos + 1, end - 1)
        if colon < 0 or 0 <= first_at < colon:
            return [], resume
        at = text.rfind("@", colon + 1, end)
        return ([(colon + 1, at)] if at > colon + 1 else []), resume

    yield from drive(re.compile("://"), text, work, attempt)


_CARD_SEPARATORS = " \u00a0\u2007\u202f.\\-"
_CARD_RUN = re.compile(rf"\d(?:[{_CARD_SEPARATORS}]{{0,2}}+\d)*+")
_CARD_MIN_DIGITS = 13
#: Where a run of digit groups starts (a digit after no digit) that holds at least 13 digits:
#: the walk from a digit is the same wherever it starts, so this finds exactly the runs that
#: could hold a card, and the shorter runs between them (most, in text with digits) are passed
#: over inside one search instead of one attempt each.
_CARD_START = re.compile(rf"(?<!\d)\d(?:[{_CARD_SEPARATORS}]{{0,2}}+\d){{{_CARD_MIN_DIGITS - 1}}}")


#: ASCII text: digits and the ASCII separators read as ``0``, every other byte as ``x``: a card
#: needs 13 of them in a row, which one C-speed search finds (the regular expression above pays
#: an attempt at every digit, and text such as hex ids is mostly digits).
_CARD_BYTES = bytes(48 if chr(b).isdigit() or chr(b) in " .-" else 120 for b in range(256))
_CARD_WINDOW = b"0" * _CARD_MIN_DIGITS


def card_numbers(text: str, work: Work) -> Iterator[Span]:
    """Card numbers in a run of digit groups (separated by up to two spaces, no-break spaces,
    dots or dashes); :func:`card_spans` finds the card in the run.

    In ASCII text only the stretches of 13 or more digits and separators are searched: a card
    lies within one, and the searches below match the same there as in the whole text (they read
    digits and separators only, and a stretch has neither just before nor just after it)."""
    if not text.isascii():
        yield from _cards_in(text, 0, work)
        return
    classes = text.encode("ascii").translate(_CARD_BYTES)
    work.linear(len(text))
    pos = 0
    while True:
        start = classes.find(_CARD_WINDOW, pos)
        if start < 0:
            return
        end = classes.find(b"x", start)
        end = len(text) if end < 0 else end
        work.linear(end - start)
        yield from _cards_in(text[start:end], start, work)
        pos = end


def _cards_in(text: str, base: int, work: Work) -> Iterator[Span]:
    """The card spans of ``text`` (offset by ``base``)."""
    pos = 0
    while True:
        found = _CARD_START.search(text, pos)
        if found is None:
            work.linear(len(text) - pos)
            return
        start = found.start()
        run = _CARD_RUN.match(text, start)
        if run is None:  # the search matched a digit there, so the run always matches
            return
        work.linear(found.end() - pos + 2 * (run.end() - start) + 3)  # the search, the run
        yield from ((base + start + a, base + start + b) for a, b in card_spans(run.group()))
        pos = run.end()


# --- the default shapes ------------------------------------------------------------------

_LEFT = r"(?<![A-Za-z0-9])"
_TOKEN = "A-Za-z0-9_\\-"  # noqa: S105 - a character class, not a password
_ALNUM = "A-Za-z0-9"


def _token(
    name: str,
    prefix: str,
    body: str,
    least: int,
    chars: str | None = _ALNUM,
    *,
    hint: str | None = None,
    hint_words: tuple[str, ...] | None = None,
) -> Rule:
    """``prefix`` (not glued to a letter or digit on its left) and at least ``least`` of
    ``body``; the tail reads the rest of the run of ``chars`` (None: exactly ``least``).
    ``hint`` (by default the prefix) is a part of the prefix that a fast search finds."""
    return Rule.of(
        name,
        f"{prefix}[{body}]{{{least}}}",
        anchor=_LEFT + prefix,
        window=WINDOW + least,
        tail=() if chars is None else (Run(chars),),
        hint=prefix if hint is None else hint,
        hint_words=hint_words,
    )


#: Words that, followed by ``=`` or ``:``, introduce a secret in free text, in a query string
#: or in JSON written inside a string (``api_key=…``, ``X-Api-Key: …``, ``?password=…``,
#: ``\"clientSecret\": \"…\"``). Either not glued to a letter or digit, or a camelCase word.
_WORDS = (
    r"pass(?:word|wd|phrase)?|pwd|secret|token|api[_\-]?key|access[_\-]?key"
    r"|private[_\-]?key(?:[_\-]?id)?|credentials?"
)
_ASSIGNED = (
    rf"(?i:{_WORDS})(?:\\?[\"'])?[ \t]{{0,4}}[:=][ \t]{{0,4}}(?:\\?[\"'])?"
    r"(?P<val>(?<=[\"'])[^\"'\\\n]{1,256}+|(?<![\"'])[^\s\"'&,;<>\\]{1,256}+)"
)

DEFAULT_RULES: tuple[Rule, ...] = (
    custom("private_key", private_keys, needs=_PEM_NEEDS),
    custom("url_password", url_passwords, needs=_URL_NEEDS),
    Rule.of(
        "bearer_token",
        r"bearer\s{1,16}+(?P<tok>[A-Za-z0-9\-._~+/]{8})",
        group="tok",
        flags=re.IGNORECASE,
        anchor=_LEFT + "bearer",
        hint="bearer",
        hint_folds=True,
        tail=(Run(r"A-Za-z0-9\-._~+/"), Run("=")),
    ),
    Rule.of(
        "basic_auth",
        r"basic\s{1,16}+(?P<tok>[A-Za-z0-9+/]{8})",
        group="tok",
        flags=re.IGNORECASE,
        anchor=_LEFT + "basic",
        hint="basic",
        hint_folds=True,
        tail=(Run("A-Za-z0-9+/"), Run("=")),
    ),
    Rule.of(
        "jwt",
        rf"eyJ[{_TOKEN}]{{5,}}+\.eyJ",
        anchor=_LEFT + "eyJ",
        hint="eyJ",
        window=512,
        tail=(Run(_TOKEN, 5), Lit("."), Run(_TOKEN)),
    ),
    _token(
        "stripe_key",
        "(?:sk|rk|pk)_(?:live|test)_",
        _ALNUM,
        10,
        hint="_(?:live|test)_",
        hint_words=("_live_", "_test_"),
    ),
    _token("stripe_webhook_secret", "whsec_", _ALNUM + "+/=", 20, _ALNUM + "+/="),
    _token("openai_key", "sk-", _TOKEN, 20, _TOKEN),
    Rule.of(
        "aws_access_key_id",
        "(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}",
        anchor=_LEFT + "(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)",
        hint="(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)",
        hint_words=("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),
    ),
    Rule.of(
        "aws_secret_access_key",
        r"(?i:aws_?secret_?access_?key|aws_?secret)[\"'\s:=]{1,16}+(?P<sec>[A-Za-z0-9/+=]{40})",
        group="sec",
        anchor="(?i:aws)",
        hint="aws",
        hint_folds=True,
        window=100,
    ),
    _token(
        "github_token",
        "gh[pousr]_",
        _ALNUM,
        30,
        hint_words=("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ),
    _token("github_token", "github_pat_", _ALNUM + "_", 22, _ALNUM + "_"),
    _token(
        "slack_token",
        "xox[abposr]-",
        _ALNUM + "\\-",
        10,
        _ALNUM + "\\-",
        hint_words=("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"),
    ),
    _token(
        "slack_webhook",
        r"https://hooks\.slack\.com/services/",
        "A-Za-z0-9/_\\-",
        1,
        "A-Za-z0-9/_\\-",
        hint_words=("https://hooks.slack.com/services/",),
    ),
    _token("google_api_key", "AIza", _TOKEN, 35, None),
    _token("npm_token", "npm_", _ALNUM, 30),
    _token("huggingface_token", "hf_", _ALNUM, 30),
    custom("card_number", card_numbers),
    Rule.of(
        "secret_assignment",
        _ASSIGNED,
        group="val",
        anchor=rf"(?:(?<![A-Za-z0-9])|(?<=[a-z0-9])(?=[A-Z]))(?i:{_WORDS})",
        hint=_WORDS,
        hint_folds=True,
        # what every branch of _WORDS begins with
        hint_words=("pass", "pwd", "secret", "token", "api", "access", "private", "credential"),
        window=320,
        tail=(Run(r"^\s\"'&,;<>\\"),),
    ),
)
