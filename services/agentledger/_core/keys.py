"""Deterministic idempotency keys and approval intent hashes (invariants 2 and 8)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

from agentledger.errors import RunError
from agentledger.providers.hashing import canonical_json, sha256_hex

#: Effect and activity names travel inside idempotency keys: keep them short and plain.
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$")
KEY_VERSION = "al1"
#: Run ids name Kafka record keys, Redis keys and log lines: printable, no spaces, bounded.
MAX_RUN_ID = 200
RUN_ID_PATTERN = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._:@+=~/\-]{{0,{MAX_RUN_ID - 1}}}$")


def check_name(what: str, name: str) -> str:
    """Return ``name`` if it is a valid step/activity/effect name, else raise ValueError."""
    if not NAME_PATTERN.fullmatch(name):
        msg = f"{what} name {name!r} must match {NAME_PATTERN.pattern} (e.g. 'refund')"
        raise ValueError(msg)
    return name


#: Names each followed by a newline, each matching NAME_PATTERN (whose characters hold none).
_NAMES_PATTERN = re.compile(r"(?:[A-Za-z][A-Za-z0-9_.\-]{0,63}\n)*")


def check_names(what: str, names: Sequence[str]) -> None:
    """:func:`check_name` of every name (the first one that is not valid raises), in one
    regex pass over the names joined when all are valid: a resume checks a plan of 1,000
    steps before it is ready. A name holding a newline would pass as two: one newline more
    than there are names tells it, and the names are then checked one by one."""
    if names:
        try:
            joined = "\n".join(names) + "\n"
        except TypeError:
            joined = ""
        if joined.count("\n") == len(names) and _NAMES_PATTERN.fullmatch(joined):
            return
    for name in names:
        check_name(what, name)


def check_run_id(run_id: str) -> str:
    """Return ``run_id`` if it can name a run, else raise RunError saying what is allowed."""
    if not RUN_ID_PATTERN.fullmatch(run_id):
        shown = run_id if len(run_id) <= 80 else f"{run_id[:80]}… ({len(run_id)} characters)"
        msg = (
            f"run id {shown!r} must be 1-{MAX_RUN_ID} characters: letters, digits and "
            "._:@+=~/- (starting with a letter or digit)"
        )
        raise RunError(msg, run_id=run_id[:80])
    return run_id


def effect_key(run_id: str, step: int, effect: str, ordinal: int) -> str:
    """The idempotency key of the ``ordinal``-th effect (0-based) of ``step`` in ``run_id``.

    Never change it: providers remember keys forever, so a different derivation would make a
    resumed run send a second, different key for an effect that already happened. The key is a
    pure function of (run, step, effect name, ordinal in step) — never random, never of the
    attempt — so every attempt and every resume of a step sends the same key for the same effect.
    The readable prefix helps a person; the digest over all four parts makes it unique.
    """
    check_name("effect", effect)
    if step < 0 or ordinal < 0:
        msg = f"step ({step}) and ordinal ({ordinal}) are 0-based"
        raise ValueError(msg)
    digest = hashlib.sha256(
        canonical_json({"effect": effect, "ordinal": ordinal, "run": run_id, "step": step})
    ).hexdigest()
    return f"{KEY_VERSION}-{effect}-s{step}-o{ordinal}-{digest[:32]}"


def intent_hash(intent: Mapping[str, object]) -> str:
    """The hash an approval is bound to: sha256 of the canonical JSON of what is approved."""
    return sha256_hex(intent)
