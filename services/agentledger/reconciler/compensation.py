"""Undoing performed effects: of steps rejected for good (automatic), or on an operator's request.

The compensation is sent once under its own deterministic key (see
:func:`~agentledger.reconciler.scan.compensation_key`), so a retry after an unanswered call is
the same compensation, never a second one. An effect the adapter cannot undo raises an alert
instead of being guessed at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog

from agentledger.alerts.book import AlertBook
from agentledger.alerts.codes import EFFECT_COMPENSATION_FAILED, EFFECT_NOT_COMPENSABLE
from agentledger.alerts.model import AlertCondition, condition_key
from agentledger.errors import LeaseHeldError, ProviderUnavailableError, RunError
from agentledger.events.models import Alert, EffectCompensated, Event, now_ms
from agentledger.providers.protocol import ProviderResult
from agentledger.reconciler.claim import Claim, RunClaimer
from agentledger.reconciler.providers import ProviderPool
from agentledger.reconciler.report import PassReport
from agentledger.reconciler.scan import compensation_key, compensations_due
from agentledger.views.model import EffectView

_log = structlog.get_logger(__name__)
Outcome = Literal["succeeded", "failed", "unknown", "not_compensable", "already", "not_performed"]
COMPENSATE_STATUSES: tuple[str, ...] = ("failed", "rejected", "cancelled", "budget_exceeded")
_PERFORMED = frozenset({"succeeded", "landed"})


@dataclass(frozen=True)
class CompensationResult:
    """What happened to one effect's compensation."""

    run_id: str
    idempotency_key: str
    effect: str
    outcome: Outcome
    compensation_key: str | None = None
    external_ref: str | None = None
    detail: str = ""


class Compensator:
    """Calls ``compensate`` through the provider pool, as the holder of the run's lease."""

    def __init__(
        self,
        claimer: RunClaimer,
        providers: ProviderPool,
        book: AlertBook,
        *,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._claimer = claimer
        self._providers = providers
        self._book = book
        self._clock = clock

    async def scan(self, report: PassReport, *, limit: int) -> None:
        """Compensate what finished-but-failed runs left performed in their rejected steps."""
        views = self._claimer.views
        for status in COMPENSATE_STATUSES:
            for run_id in await views.runs_by_status(status, limit=limit):
                view = await views.load(run_id)
                if view is None or not compensations_due(view):
                    continue
                try:
                    results = await self.compensate(run_id, None, hint_fence=view.fence)
                except (LeaseHeldError, RunError) as e:
                    report.errors += 1
                    _log.warning("compensation_skipped", run_id=run_id, error=str(e))
                    continue
                for result in results:
                    if result.outcome == "succeeded":
                        report.compensated += 1
                    elif result.outcome in {"failed", "unknown", "not_compensable"}:
                        report.compensation_failures += 1

    async def compensate(
        self, run_id: str, keys: Sequence[str] | None, *, hint_fence: int = 0
    ) -> list[CompensationResult]:
        """Compensate ``keys`` of the run (None = every effect due after a final rejection).

        Raises LeaseHeldError while a live writer holds the run, RunError for an unknown key.
        """
        async with self._claimer.claim(run_id, floor=hint_fence) as claim:
            view = claim.view
            if keys is None:
                targets = compensations_due(view)
            else:
                missing = [k for k in keys if k not in view.effects]
                if missing:
                    msg = f"no effect with idempotency key {missing[0]!r}"
                    raise RunError(msg, run_id=run_id)
                targets = [view.effects[k] for k in keys]
            results: list[CompensationResult] = []
            events: list[Event] = []
            alerts: list[Alert] = []
            settled: dict[str, str] = {}
            for effect in targets:
                result, event, problem = await self._one(
                    claim, effect, view.applied_seq + 1 + len(events)
                )
                results.append(result)
                if event is not None:
                    events.append(event)
                if problem is not None:
                    alerts += await self._book.observe([problem])
                elif result.outcome in {"succeeded", "already"}:
                    for code in (EFFECT_COMPENSATION_FAILED, EFFECT_NOT_COMPENSABLE):
                        key = condition_key(
                            code.code, run_id=run_id, idempotency_key=effect.idempotency_key
                        )
                        settled[key] = f"compensated: {result.detail}"
            alerts += await self._book.close(settled)
            if events or alerts:
                await self._claimer.log.publish([*events, *alerts])
                await self._book.confirm(alerts)
            return results

    async def _one(
        self, claim: Claim, effect: EffectView, seq: int
    ) -> tuple[CompensationResult, EffectCompensated | None, AlertCondition | None]:
        """Compensate one effect: the result, the event to write, the alert to raise."""
        view = claim.view

        def result(
            outcome: Outcome, detail: str, key: str | None = None, ref: str | None = None
        ) -> CompensationResult:
            return CompensationResult(
                view.run_id, effect.idempotency_key, effect.effect, outcome, key, ref, detail
            )

        def event(
            key: str, outcome: Literal["succeeded", "failed"], ref: str | None, detail: str
        ) -> EffectCompensated:
            return EffectCompensated(
                run_id=view.run_id,
                seq=seq,
                fence=claim.lease.fence,
                worker_id=self._claimer.owner,
                occurred_at=self._clock(),
                step=effect.step,
                effect=effect.effect,
                idempotency_key=effect.idempotency_key,
                compensation_key=key,
                outcome=outcome,
                external_ref=ref,
                detail=detail,
            )

        if effect.state == "compensated":
            why = f"already compensated as {effect.compensation_ref}"
            return (
                result("already", why, effect.compensation_key, effect.compensation_ref),
                None,
                None,
            )
        if effect.state not in _PERFORMED:
            why = f"the effect is {effect.state}; only performed effects can be undone"
            return result("not_performed", why), None, None
        ref = effect.external_ref
        if ref is None or not self._providers.can_compensate(effect.provider):
            why = (
                "no external reference was recorded"
                if ref is None
                else f"the adapter of provider {effect.provider!r} cannot compensate effects"
            )
            problem = _condition(EFFECT_NOT_COMPENSABLE.code, view.run_id, effect, why)
            return result("not_compensable", why), None, problem
        key = compensation_key(effect.idempotency_key)
        answer = await self._providers.compensate(effect.provider, effect.kind, ref, key)
        if isinstance(answer, ProviderResult):
            why = f"{ref} compensated as {answer.external_ref}"
            _log.info("effect_compensated", run_id=view.run_id, effect=effect.effect, ref=ref)
            done = event(key, "succeeded", answer.external_ref, why)
            return result("succeeded", why, key, answer.external_ref), done, None
        if isinstance(answer, ProviderUnavailableError):
            why = f"no answer, retried later under the same key {key}: {answer}"
            problem = _condition(EFFECT_COMPENSATION_FAILED.code, view.run_id, effect, why)
            return result("unknown", why, key), None, problem
        why = f"the provider refused: {answer}"
        problem = _condition(EFFECT_COMPENSATION_FAILED.code, view.run_id, effect, why)
        return result("failed", why, key), event(key, "failed", None, why), problem


def _condition(code: str, run_id: str, effect: EffectView, why: str) -> AlertCondition:
    return AlertCondition(
        code=code,
        run_id=run_id,
        step=effect.step,
        effect=effect.effect,
        idempotency_key=effect.idempotency_key,
        summary=f"{effect.effect} ({effect.kind} {effect.external_ref or '?'}) of run {run_id} "
        f"step {effect.step} was not undone: {why}",
        detail={
            "provider": effect.provider,
            "kind": effect.kind,
            "external_ref": effect.external_ref,
        },
    )
