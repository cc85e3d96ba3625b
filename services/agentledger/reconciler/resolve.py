"""An operator's verdict on an effect nobody could resolve, as the writes the reconciler makes.

A person who checked the provider by hand says LANDED (with the provider's reference) or
NOT_LANDED; :func:`plan_resolve` turns that into the reconciler's own plan (EffectReconciled,
the alerts to clear, a resume once nothing is open), written as ``operator:<name>`` with the
operator's note in ``detail``. Nothing here performs I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentledger.errors import RunError
from agentledger.reconciler.decide import Resolution, RunPlan, plan_run
from agentledger.reconciler.effects import find_effect_keys
from agentledger.redaction import DEFAULT_REDACTOR
from agentledger.views.model import OPEN_EFFECT_STATES, EffectView, RunView

#: Prefix of the writer (lease owner, ``worker_id``) of an operator's verdict.
OPERATOR_PREFIX = "operator:"


@dataclass(frozen=True)
class Verdict:
    """What a person found at the provider about one effect."""

    landed: bool
    external_ref: str | None
    note: str
    by: str

    @property
    def writer(self) -> str:
        """The lease owner and ``worker_id`` of the verdict's events."""
        return f"{OPERATOR_PREFIX}{self.by}"

    def detail(self) -> str:
        """The ``detail`` of the EffectReconciled: who decided, what, and their note."""
        what = f"landed as {self.external_ref}" if self.landed else "did not land"
        text = f"resolved by operator {self.by}: {what}, checked at the provider by hand"
        return f"{text}; note: {self.note}" if self.note else text


def verdict(
    run_id: str, effect: str, *, landed: bool, external_ref: str | None, note: str, by: str
) -> Verdict:
    """The verdict of the command's arguments; RunError when they do not make one."""
    if landed and not external_ref:
        msg = (
            "--landed needs --ref EXTERNAL_REF, the provider's id of the effect (from its "
            "dashboard): a resumed worker returns it instead of calling the provider"
        )
        raise RunError(msg, run_id=run_id, effect=effect)
    if not landed and external_ref:
        msg = "--not-landed takes no --ref: an effect that did not happen has no reference"
        raise RunError(msg, run_id=run_id, effect=effect)
    if not by.strip():
        raise RunError("--by must name the operator", run_id=run_id, effect=effect)
    # The note is free text a person typed: it is redacted like any detail (invariant 10).
    return Verdict(landed, external_ref or None, DEFAULT_REDACTOR.text(note.strip()), by.strip())


def open_effect(view: RunView, effect: str) -> EffectView:
    """The effect meant by ``effect`` (key or unambiguous name) if it still has no outcome."""
    [key] = find_effect_keys(view, effect)
    found = view.effects[key]
    if found.state not in OPEN_EFFECT_STATES:
        ref = f" as {found.external_ref}" if found.external_ref else ""
        msg = (
            f"effect {found.effect} ({key}) already has an outcome: {found.state}{ref}"
            f"{' (' + found.detail + ')' if found.detail else ''}; only an effect that is "
            "intended or unknown can be resolved by hand"
        )
        raise RunError(msg, run_id=view.run_id, step=found.step)
    return found


def resolution(effect: EffectView, v: Verdict) -> Resolution:
    """The verdict as the finding the reconciler would have written."""
    return Resolution(
        effect.idempotency_key,
        "LANDED" if v.landed else "NOT_LANDED",
        external_ref=v.external_ref if v.landed else None,
        detail=v.detail(),
    )


def plan_resolve(view: RunView, effect: str, v: Verdict, *, fence: int, now: int) -> RunPlan:
    """The reconciler's plan for the verdict on ``effect`` of the run's latest ``view``."""
    target = open_effect(view, effect)
    return plan_run(view, [resolution(target, v)], fence=fence, writer=v.writer, now=now)
