"""Replay checks: a resumed run must ask for the same step, activity and effect at each place."""

from __future__ import annotations

from agentledger.errors import ReplayMismatchError
from agentledger.views import EffectView, RunView, StepView


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


def effect_index(view: RunView) -> dict[tuple[int, int], str]:
    """(step, ordinal) -> idempotency key of every effect the view records."""
    return {(step, ordinal): key for key, step, ordinal, _ in view.placed_effects() if ordinal >= 0}


def check_effect(run_id: str, recorded: EffectView | None, ordinal: int, name: str) -> None:
    """Raise unless the effect recorded at this step's ``ordinal`` (if any) is ``name``."""
    if recorded is not None and recorded.effect != name:
        msg = f"effect {ordinal} was recorded as {recorded.effect!r}, this code asks for {name!r}"
        raise ReplayMismatchError(msg, run_id=run_id, step=recorded.step, effect=name)
