"""Effects: intent before the call, the same key on every retry, never a guess (invariants 2-4).

:func:`perform_effect` records EffectIntended durably, calls the provider with the derived key,
and queues the outcome (it rides with the step's next publish). :func:`resolve_open` asks the
provider about an intent without an outcome; a resume calls it for every open intent first.
"""

from __future__ import annotations

from agentledger.errors import (
    EffectFailedError,
    EffectUnknownError,
    IdentityMismatchError,
    ProviderConflictError,
    ProviderError,
    ProviderIdentityConflictError,
    ProviderUnavailableError,
)
from agentledger.events.models import EffectIntended, EffectReconciled, EffectRecorded
from agentledger.providers.protocol import EffectRequest
from agentledger.views import OPEN_EFFECT_STATES, PERFORMED_STATES, EffectView
from agentledger.worker.keys import effect_key
from agentledger.worker.replay import check_effect
from agentledger.worker.session import RunSession
from agentledger.worker.spec import EffectResult


def _result(effect: EffectView, *, replayed: bool) -> EffectResult:
    return EffectResult(
        effect=effect.effect,
        key=effect.idempotency_key,
        state=effect.state,
        external_ref=effect.external_ref,
        response_hash=effect.response_hash,
        replayed=replayed,
    )


async def resolve_open(session: RunSession, effect: EffectView) -> None:
    """Record what the provider says became of an open intent; pause if it cannot tell."""
    writer = session.writable()
    name, provider = session.services.provider(effect.provider or None, run_id=session.run_id)
    key = effect.idempotency_key
    try:
        found = await provider.lookup(effect.kind, key)
    except ProviderError as e:
        writer.append(
            EffectReconciled,
            step=effect.step,
            effect=effect.effect,
            idempotency_key=key,
            finding="UNKNOWN",
            detail=session.services.payloads.text(f"lookup at {name} failed: {e}"),
        )
        raise await _unknown(session, effect.step, effect.effect, key, f"lookup failed: {e}") from e
    if found.result is not None:
        writer.append(
            EffectReconciled,
            step=effect.step,
            effect=effect.effect,
            idempotency_key=key,
            finding="LANDED",
            external_ref=found.result.external_ref,
            response_hash=found.result.response_hash,
            detail=f"found at {name} by lookup",
        )
    else:
        writer.append(
            EffectReconciled,
            step=effect.step,
            effect=effect.effect,
            idempotency_key=key,
            finding="NOT_LANDED",
            detail=f"{name} has no effect under this key: safe to send with the same key",
        )
    session.log.info("effect_resolved", key=key, effect=effect.effect, found=found.found)


async def _unknown(
    session: RunSession, step: int, effect: str, key: str, why: str
) -> EffectUnknownError:
    """Pause the run for reconciliation (with an alert) and return the error to raise."""
    writer = session.writable()
    text = session.services.payloads.text(why)
    session.pause(
        "effect_unknown", step=step, payload={"effect": effect, "key": key, "error": text}
    )
    writer.alert(
        "effect_unknown",
        f"run {session.run_id} step {step} effect {effect}: outcome unknown ({text})",
        step=step,
        effect=effect,
        key=key,
        action="reconcile: look the key up at the provider, then resume the run",
    )
    await writer.flush()
    session.log.warning("effect_unknown", step=step, effect=effect, key=key, error=text)
    return EffectUnknownError(
        f"outcome unknown, run paused for reconciliation: {text}",
        run_id=session.run_id,
        step=step,
        effect=effect,
        key=key,
    )


async def _mismatch(
    session: RunSession, *, step: int, effect: str, key: str, recorded: str, new: str
) -> IdentityMismatchError:
    """Stop the run on a changed identity (pause + critical alert) and return the error."""
    writer = session.writable()
    error = IdentityMismatchError(
        run_id=session.run_id,
        step=step,
        effect=effect,
        key=key,
        recorded_hash=recorded,
        new_hash=new,
    )
    session.pause(
        "identity_mismatch",
        step=step,
        payload={"effect": effect, "key": key, "recorded_hash": recorded, "new_hash": new},
    )
    writer.alert(
        "identity_mismatch",
        str(error),
        step=step,
        effect=effect,
        key=key,
        action="the agent changed an effect's identity fields on retry: fix the code, then resume",
    )
    await writer.flush()
    session.log.error("identity_mismatch", step=step, effect=effect, key=key)
    return error


async def perform_effect(
    session: RunSession,
    *,
    step: int,
    ordinal: int,
    name: str,
    request: EffectRequest,
    provider_name: str | None,
) -> EffectResult:
    """Perform effect ``ordinal`` of ``step`` at most once; return the recorded outcome."""
    key = effect_key(session.run_id, step, name, ordinal)
    view = session.view
    placed = session.places.get((step, ordinal))
    recorded = view.effects.get(placed) if placed is not None else None
    check_effect(session.run_id, recorded, ordinal, name)
    recorded = recorded or view.effects.get(key)
    if recorded is not None:
        if recorded.identity_hash and recorded.identity_hash != request.identity_hash:
            raise await _mismatch(
                session,
                step=step,
                effect=name,
                key=key,
                recorded=recorded.identity_hash,
                new=request.identity_hash,
            )
        if recorded.state in OPEN_EFFECT_STATES:
            await resolve_open(session, recorded)
            recorded = session.view.effects[key]
        if recorded.state in PERFORMED_STATES:
            if recorded.payload_hash and recorded.payload_hash != request.payload_hash:
                session.log.info("effect_free_text_changed", step=step, effect=name, key=key)
            return _result(recorded, replayed=True)
        if recorded.state == "failed":
            msg = f"the provider refused this effect earlier: {recorded.error}"
            raise EffectFailedError(msg, run_id=session.run_id, step=step, effect=name, key=key)
    return await _send(
        session,
        step=step,
        ordinal=ordinal,
        name=name,
        key=key,
        request=request,
        provider_name=provider_name,
    )


async def _send(
    session: RunSession,
    *,
    step: int,
    ordinal: int,
    name: str,
    key: str,
    request: EffectRequest,
    provider_name: str | None,
) -> EffectResult:
    """Intent (durable), call, outcome (queued)."""
    await session.check_spending(step)
    pname, provider = session.services.provider(provider_name, run_id=session.run_id)
    writer = session.writable()
    payloads = session.services.payloads
    writer.append(
        EffectIntended,
        step=step,
        ordinal=ordinal,
        effect=name,
        provider=pname,
        kind=request.kind,
        idempotency_key=key,
        identity_hash=request.identity_hash,
        payload_hash=request.payload_hash,
        request_json=payloads.inline(
            {"identity": request.identity, "free_text": request.free_text}
        ),
    )
    session.places[(step, ordinal)] = key
    session.ensure_lease()
    await writer.flush()  # invariant 2: the intent is durable before the provider is called
    try:
        answer = await provider.perform(request, key)
    except ProviderUnavailableError as e:
        writer.append(
            EffectRecorded,
            step=step,
            effect=name,
            idempotency_key=key,
            outcome="unknown",
            error=payloads.text(str(e)),
        )
        raise await _unknown(session, step, name, key, str(e)) from e
    except ProviderConflictError as e:
        writer.append(
            EffectRecorded,
            step=step,
            effect=name,
            idempotency_key=key,
            outcome="failed",
            error=payloads.text(str(e)),
        )
        told = e.recorded_hash if isinstance(e, ProviderIdentityConflictError) else None
        theirs = told or "(not told by the provider)"
        raise await _mismatch(
            session, step=step, effect=name, key=key, recorded=theirs, new=request.identity_hash
        ) from e
    except ProviderError as e:
        writer.append(
            EffectRecorded,
            step=step,
            effect=name,
            idempotency_key=key,
            outcome="failed",
            error=payloads.text(str(e)),
        )
        msg = f"the provider refused the effect: {e}"
        raise EffectFailedError(msg, run_id=session.run_id, step=step, effect=name, key=key) from e
    except Exception as e:  # after a send, any other failure means "we do not know"
        writer.append(
            EffectRecorded,
            step=step,
            effect=name,
            idempotency_key=key,
            outcome="unknown",
            error=payloads.text(f"{type(e).__name__}: {e}"),
        )
        raise await _unknown(session, step, name, key, f"{type(e).__name__}: {e}") from e
    session.kill_point("after_provider_commit")
    writer.append(
        EffectRecorded,
        step=step,
        effect=name,
        idempotency_key=key,
        outcome="succeeded",
        external_ref=answer.external_ref,
        response_hash=answer.response_hash,
    )
    session.log.debug("effect_performed", step=step, effect=name, key=key, ref=answer.external_ref)
    return _result(session.view.effects[key], replayed=False)
