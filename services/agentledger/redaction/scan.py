"""Finding secrets in linear time: anchors, bounded heads and possessive tails.

Python's regular expressions backtrack, and a pattern such as ``\\b[a-z][a-z.]*://`` restarted at
every position of a long run of letters and dots does quadratic work (finding 8 of issue 17). So
no rule hands the engine an unbounded amount of text to backtrack over:

1. an *anchor* (a pattern without repeats, so each position costs a bounded amount) finds where a
   secret can start;
2. the rule's *head* is matched there within ``window`` characters, so a failed attempt costs at
   most ``window``;
3. the *tail*, which makes a secret as long as it is, is a sequence of possessive character-class
   runs and literals (:class:`Run`, :class:`Lit`): each character is read once, never given back.

After a match the next anchor is searched from the match's end, after a failed attempt from the
next character. :class:`Work` counts what the engine was given, which bounds its steps: that is
what the tests check on generated worst cases (never the wall time).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

Span = tuple[int, int]


@dataclass
class Work:
    """What the scan handed to the regular-expression engine, in characters.

    ``chars`` sums, over every call, the characters the engine may read (the window of a head,
    the run a tail read plus one, the stretch an anchor search crossed); ``widest`` is the
    largest window a single backtracking call got; ``unbounded`` counts calls on whole texts
    (rules without an anchor, which only a project's own rules may be).
    """

    chars: int = 0
    widest: int = 0
    unbounded: int = 0

    def bounded(self, size: int) -> None:
        """Record a backtracking call confined to ``size`` characters."""
        self.chars += size
        self.widest = max(self.widest, size)

    def linear(self, size: int) -> None:
        """Record a call reading ``size`` characters once (a possessive run, a literal search)."""
        self.chars += size


@dataclass(frozen=True)
class Run:
    """A possessive run of ``chars`` (a character-class body such as ``A-Za-z0-9``), at least
    ``least`` long."""

    chars: str
    least: int = 0
    regex: re.Pattern[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(f"[{self.chars}]*+"))

    def read(self, text: str, pos: int, work: Work) -> int | None:
        """The end of the run starting at ``pos``, or None when it is shorter than ``least``."""
        end = self.regex.match(text, pos).end()  # type: ignore[union-attr]  # * always matches
        work.linear(end - pos + 1)
        return end if end - pos >= self.least else None


@dataclass(frozen=True)
class Lit:
    """A literal that must come next."""

    text: str

    def read(self, text: str, pos: int, work: Work) -> int | None:
        """The position after the literal at ``pos``, or None when it is not there."""
        work.linear(len(self.text))
        return pos + len(self.text) if text.startswith(self.text, pos) else None


Step = Run | Lit
Finder = Callable[[str, Work], Iterator[Span]]


def read_tail(tail: tuple[Step, ...], text: str, pos: int, work: Work) -> int | None:
    """Where ``tail`` read from ``pos`` ends, or None when one of its steps is not there."""
    at = pos
    for step in tail:
        end = step.read(text, at, work)
        if end is None:
            return None
        at = end
    return at


def anchors(
    anchor: re.Pattern[str], text: str, work: Work, start: int = 0
) -> Generator[int, int | None, None]:
    """Positions where ``anchor`` matches, each searched from ``start`` or after the last one.

    The caller sends the position to resume from (a match's end) with ``send``; by default the
    search goes on from the next character.
    """
    pos = start
    while pos <= len(text):
        found = anchor.search(text, pos)
        if found is None:
            work.linear(len(text) - pos)
            return
        work.linear(found.end() - pos + 1)
        resume = yield found.start()
        pos = found.start() + 1 if resume is None else max(resume, found.start() + 1)


Hit = tuple[list[Span], int]
"""What one attempt found: the spans to mask and where the search resumes."""


def drive(
    anchor: re.Pattern[str], text: str, work: Work, attempt: Callable[[int], Hit | None]
) -> Iterator[Span]:
    """The spans ``attempt`` finds at each anchor; the search resumes after each hit."""
    walk = anchors(anchor, text, work)
    try:
        pos = next(walk)
        while True:
            hit = attempt(pos)
            if hit is None:
                pos = walk.send(None)
            else:
                yield from hit[0]
                pos = walk.send(hit[1])
    except StopIteration:
        return
