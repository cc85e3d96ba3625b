"""Which records of the bench's runs leave nothing of themselves in the run's final stored view?

For each event of ``sample_run(run_id, steps)`` and each of its body fields (not the envelope),
the field is changed to another valid value and the run folded again by the rebuild's plain
fold; the event is *superseded* if no such change moves the stored bytes (run, steps and effects
hashes). Reported twice: with the run hash as stored, and without its ``recent_digests`` field
(what the handlers alone leave).
Run: ``.venv/bin/python bench/results/session20-rebuild6/superseded.py [steps]``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from agentledger.projector.testing import sample_run
from agentledger.views.bulk_fold import PlainRun

ENVELOPE = {"event_id", "run_id", "seq", "fence", "worker_id", "occurred_at"}


def stored(events: list[Any], digests: bool) -> tuple[Any, ...]:
    plain = PlainRun(events[0].run_id)
    plain.fold(events)
    run, steps, effects = plain.stored(0)
    if not digests:
        run = {k: v for k, v in run.items() if k != "recent_digests"}
    return run, steps, effects


def other(value: Any) -> Any | None:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "x" if not value.startswith('"') else '"okx"'
    if isinstance(value, list):
        return [*value, "x"]
    return None


def main(steps: int) -> dict[str, Any]:
    events = sample_run("b0000001", steps=steps, start_ms=1_000)
    out: dict[str, Any] = {}
    base = {d: stored(events, d) for d in (True, False)}
    for i, ev in enumerate(events):
        moved: dict[bool, list[str]] = {True: [], False: []}
        for name in type(ev).model_fields:
            if name in ENVELOPE:
                continue
            new = other(getattr(ev, name))
            if new is None:
                continue
            try:
                changed = ev.model_copy(update={name: new})
                type(ev).model_validate(changed.model_dump())
            except ValueError:  # pydantic's ValidationError: no valid value of that kind
                continue
            varied = [*events[:i], changed, *events[i + 1 :]]
            for d in (True, False):
                if stored(varied, d) != base[d]:
                    moved[d].append(name)
        out[f"{ev.seq}:{type(ev).__name__}"] = {
            "fields_that_move_stored_view": moved[True],
            "without_recent_digests": moved[False],
        }
    return out


if __name__ == "__main__":
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    result = main(steps)
    json.dump(result, sys.stdout, indent=1)
    sup = [k for k, v in result.items() if not v["fields_that_move_stored_view"]]
    sup2 = [k for k, v in result.items() if not v["without_recent_digests"]]
    print(f"\nsuperseded: {len(sup)}/{len(result)} {sup}")
    print(f"superseded but for the digests: {len(sup2)}/{len(result)} {sup2}")
