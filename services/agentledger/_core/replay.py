"""Replay checks: a resumed run must ask for the same step, activity and effect at each place."""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping

from agentledger.errors import ReplayMismatchError
from agentledger.views import EffectView, RunView, StepView
from agentledger.views.model import PLACE_SHIFT, place_of_brief


def check_step(view: RunView, index: int, name: str) -> None:
    """Raise unless step ``index`` is ``name`` in the record and in the plan (if it has one)."""
    recorded = view.steps.get(index)
    if recorded is not None and recorded.name != name:
        msg = f"step {index} was recorded as {recorded.name!r}, this code asks for {name!r}"
        raise ReplayMismatchError(msg, run_id=view.run_id, step=index)
    if not view.plan:  # no plan: the steps are what the code calls, in order
        return
    if index >= len(view.plan):
        msg = (
            f"step {index} ({name!r}) is beyond the plan {view.plan} (plan version "
            f"{view.plan_version}); revise the plan first"
        )
        raise ReplayMismatchError(msg, run_id=view.run_id, step=index)
    if view.plan[index] != name:
        msg = f"the plan names step {index} {view.plan[index]!r}, this code asks for {name!r}"
        raise ReplayMismatchError(msg, run_id=view.run_id, step=index)


def check_activity(run_id: str, step: StepView, ordinal: int, name: str) -> None:
    """Raise unless the recorded activity ``ordinal`` of this attempt (if any) is ``name``."""
    recorded = step.activities.get(ordinal)
    if recorded is not None and recorded.name != name:
        msg = f"activity {ordinal} was recorded as {recorded.name!r}, this code asks for {name!r}"
        raise ReplayMismatchError(msg, run_id=run_id, step=step.step)


#: A place (step, ordinal) is kept as the one int ``step << 32 | ordinal`` where that int names
#: it alone: a step of 0 or more and an ordinal below this.
_ORDINALS = 1 << 32


class EffectIndex(MutableMapping[tuple[int, int], str]):
    """(step, ordinal) -> idempotency key, a mapping whose places are kept as one int each
    (``step << 32 | ordinal``) rather than a tuple: a resume indexes every effect of the run
    before it is ready, and a tuple per effect is an object the cyclic collector counts (a
    1,000-effect run's index made ~1,000 of them, one young collection and a half; DESIGN.md
    §13, "Resume, session 19"). A place that one int cannot name alone (a negative step, an
    ordinal of 2**32 or more) is kept by its tuple."""

    __slots__ = ("_others", "_packed")

    def __init__(self, packed: dict[int, str] | None = None) -> None:
        self._packed: dict[int, str] = {} if packed is None else packed
        self._others: dict[tuple[int, int], str] = {}

    def __getitem__(self, place: tuple[int, int]) -> str:
        step, ordinal = place
        if step >= 0 and 0 <= ordinal < _ORDINALS:
            return self._packed[step << 32 | ordinal]
        return self._others[place]

    def get(self, place: tuple[int, int], default: str | None = None) -> str | None:  # type: ignore[override]
        """The key at ``place``, else ``default`` (without raising KeyError: a new effect's
        place is looked up before it is indexed)."""
        step, ordinal = place
        if step >= 0 and 0 <= ordinal < _ORDINALS:
            return self._packed.get(step << 32 | ordinal, default)
        return self._others.get(place, default)

    def __setitem__(self, place: tuple[int, int], key: str) -> None:
        step, ordinal = place
        if step >= 0 and 0 <= ordinal < _ORDINALS:
            self._packed[step << 32 | ordinal] = key
        else:
            self._others[(step, ordinal)] = key

    def __delitem__(self, place: tuple[int, int]) -> None:
        step, ordinal = place
        if step >= 0 and 0 <= ordinal < _ORDINALS:
            del self._packed[step << 32 | ordinal]
        else:
            del self._others[place]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for packed in self._packed:
            yield packed >> 32, packed & (_ORDINALS - 1)
        yield from self._others

    def __len__(self) -> int:
        return len(self._packed) + len(self._others)

    def __repr__(self) -> str:
        return f"EffectIndex({dict(self)!r})"


def effect_index(view: RunView) -> EffectIndex:
    """(step, ordinal) -> idempotency key of every effect the view records (ordinal 0 or more;
    a later effect at the same place replaces an earlier one)."""
    keys, briefs = view.effect_briefs()
    packed: dict[int, str] = {}
    others: list[tuple[str, int, int]] = []
    for key, found in zip(keys, briefs, strict=True):
        if type(found) is int:  # a place read from a stored value's lead, packed already
            packed[found >> PLACE_SHIFT] = key
            continue
        _, step, ordinal, _ = place_of_brief(key, found)
        if step >= 0 and 0 <= ordinal < _ORDINALS:
            packed[step << 32 | ordinal] = key
        elif ordinal >= 0:
            others.append((key, step, ordinal))
    index = EffectIndex(packed)
    for key, step, ordinal in others:  # places one int cannot name (kept by their tuple)
        index[(step, ordinal)] = key
    return index


def check_effect(run_id: str, recorded: EffectView | None, ordinal: int, name: str) -> None:
    """Raise unless the effect recorded at this step's ``ordinal`` (if any) is ``name``."""
    if recorded is not None and recorded.effect != name:
        msg = f"effect {ordinal} was recorded as {recorded.effect!r}, this code asks for {name!r}"
        raise ReplayMismatchError(msg, run_id=run_id, step=recorded.step, effect=name)
