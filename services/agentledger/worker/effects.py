"""Effects: intent before the call, the same key on every retry, never a guess (invariants 2-4).

:func:`perform_effect` records EffectIntended durably, calls the provider with the derived key,
and queues the outcome (it rides with the step's next publish). :func:`resolve_open` asks the
provider about an intent without an outcome; a resume calls it for every open intent first.
The flow itself is :class:`~agentledger._core.effect_flow.EffectFlow`; what is the SDK's own
is here: the key, the step's effect index, the budget and lease checks, and pausing the run.
"""

from __future__ import annotations

from agentledger._core.effect_flow import EffectAsk, EffectFlow, EffectWriter, Wording
from agentledger._core.keys import effect_key
from agentledger._core.replay import check_effect
from agentledger._core.session import RunSession
from agentledger._core.spec import EffectResult
from agentledger.errors import EffectUnknownError, ProviderError
from agentledger.providers.protocol import EffectRequest
from agentledger.views import EffectView


class RunEffects(EffectFlow[RunSession]):
    """The effect flow of an SDK run: it pauses the run on unknown outcomes and mismatches."""

    wording = Wording(
        unknown_error="outcome unknown, run paused for reconciliation",
        unknown_action="reconcile: look the key up at the provider, then resume the run",
        mismatch_action=(
            "the agent changed an effect's identity fields on retry: fix the code, then resume"
        ),
        not_told="(not told by the provider)",
    )
    performed_level = "debug"

    def writer(self) -> EffectWriter:
        """The run's writer, if this handle can still write (not paused, finished, fenced out)."""
        return self.session.writable()

    async def before_intent(self, step: int) -> None:
        """A reached spending limit finishes the run before anything is sent."""
        await self.session.check_spending(step)

    def intent_queued(self, step: int, ordinal: int, key: str) -> None:
        """Index the effect under its step and ordinal; a lost lease stops the intent's publish."""
        self.session.places[(step, ordinal)] = key
        self.session.ensure_lease()

    def pause(self, reason: str, step: int, payload: dict[str, str]) -> None:
        """Queue RunPaused (the flow flushes it with its alert)."""
        self.session.pause(reason, step=step, payload=payload)

    def replayed(
        self, recorded: EffectView, request: EffectRequest, *, step: int, name: str, key: str
    ) -> None:
        """Note (only) that the free text changed since the effect was performed."""
        hasher = self.services.payloads.hasher
        if recorded.payload_hash and not hasher.payload_matches(
            recorded.payload_hash, request.identity, request.free_text
        ):
            self.session.log.info("effect_free_text_changed", step=step, effect=name, key=key)

    async def lookup_failed(
        self, writer: EffectWriter, effect: EffectView, provider: str, error: ProviderError
    ) -> EffectUnknownError:
        """Record the UNKNOWN finding, then pause the run for reconciliation."""
        self.append_unknown(writer, effect, f"lookup at {provider} failed: {error}")
        return await self.unknown(
            step=effect.step,
            name=effect.effect,
            key=effect.idempotency_key,
            why=f"lookup failed: {error}",
            record=False,
        )


async def resolve_open(session: RunSession, effect: EffectView) -> None:
    """Record what the provider says became of an open intent; pause if it cannot tell."""
    await RunEffects(session.services, session).resolve(effect)


async def perform_effect(
    session: RunSession,
    *,
    step: int,
    ordinal: int,
    name: str,
    request: EffectRequest,
    provider_name: str | None,
    key_step: int | None = None,
) -> EffectResult:
    """Perform effect ``ordinal`` of ``step`` at most once; return the recorded outcome.

    The key is derived from ``key_step`` when given (a call carried on from that step)."""
    key = effect_key(session.run_id, step if key_step is None else key_step, name, ordinal)
    view = session.view
    placed = session.places.get((step, ordinal))
    recorded = view.effects.get(placed) if placed is not None else None
    check_effect(session.run_id, recorded, ordinal, name)
    recorded = recorded or view.effects.get(key)
    ask = EffectAsk(step, ordinal, name, key, request, provider_name)
    return await RunEffects(session.services, session).perform(ask, recorded)
