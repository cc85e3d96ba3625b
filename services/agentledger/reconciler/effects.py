"""Effects as on-call people see them: rows for ``effects list``, lookup by name or key."""

from __future__ import annotations

from typing import Any

from agentledger.errors import RunError
from agentledger.views.keys import STATUSES
from agentledger.views.model import OPEN_EFFECT_STATES, EffectView, RunView
from agentledger.views.store import ViewReader

EFFECT_STATES: tuple[str, ...] = (
    "intended",
    "succeeded",
    "failed",
    "unknown",
    "landed",
    "not_landed",
    "compensated",
)


def effect_row(view: RunView, effect: EffectView) -> dict[str, Any]:
    """One effect as a JSON object (the stable fields first, then the details)."""
    return {
        "run_id": view.run_id,
        "step": effect.step,
        "effect": effect.effect,
        "state": effect.state,
        "idempotency_key": effect.idempotency_key,
        "external_ref": effect.external_ref,
        "provider": effect.provider,
        "kind": effect.kind,
        "ordinal": effect.ordinal,
        "identity_hash": effect.identity_hash,
        "intended_at": effect.intended_at,
        "resolved_at": effect.resolved_at,
        "detail": effect.detail,
        "compensation_key": effect.compensation_key,
        "compensation_ref": effect.compensation_ref,
        "run_status": view.status,
    }


async def effect_rows(
    views: ViewReader, *, run_id: str | None, state: str | None, limit: int
) -> list[dict[str, Any]]:
    """Effects of one run, or of up to ``limit`` runs per status, optionally of one state."""
    if run_id is not None:
        run_ids = [run_id]
    elif state in OPEN_EFFECT_STATES:
        run_ids = list(dict.fromkeys(i.run_id for i in await views.open_intents(limit=limit)))
    else:
        run_ids = []
        for status in STATUSES:
            run_ids += await views.runs_by_status(status, limit=limit)
    rows = []
    for rid in dict.fromkeys(run_ids):
        view = await views.load(rid)
        if view is None:
            continue
        ordered = sorted(view.effects.values(), key=lambda e: (e.step, e.ordinal))
        rows += [effect_row(view, e) for e in ordered if state is None or e.state == state]
    return rows


def find_effect_keys(view: RunView, effect: str) -> list[str]:
    """The idempotency key meant by ``effect`` (a key, or an effect name that is unambiguous)."""
    if effect in view.effects:
        return [effect]
    named = [e.idempotency_key for e in view.effects.values() if e.effect == effect]
    if len(named) == 1:
        return named
    if not named:
        msg = f"no effect named or keyed {effect!r} (see: agentledger effects list --run RUN)"
        raise RunError(msg, run_id=view.run_id)
    msg = f"{len(named)} effects are named {effect!r}; give the idempotency key: {named}"
    raise RunError(msg, run_id=view.run_id)
