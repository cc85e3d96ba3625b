"""Effects performed from inside a LangGraph node: intent first, one key per call, never a guess.

The key is derived from the thread, the checkpoint the task ran from, the task (LangGraph's
task id is itself derived from that checkpoint, the node and its path), the effect name and
the call's ordinal within the task's attempt. A node re-run after a crash, a retry or an
interrupt runs from the same checkpoint with the same task id, so it asks for the same keys and
gets the recorded outcome, or the provider's answer to ``lookup(key)``, instead of a second call.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

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
from agentledger.integrations.langgraph.session import ThreadSession
from agentledger.providers.hashing import canonical_json
from agentledger.providers.protocol import EffectRequest
from agentledger.views import OPEN_EFFECT_STATES, PERFORMED_STATES, EffectView
from agentledger.worker.keys import KEY_VERSION, check_name
from agentledger.worker.session import Services
from agentledger.worker.spec import EffectResult


@dataclass(frozen=True)
class EffectCall:
    """Where an effect is asked for: thread, the checkpoint the task ran from, task, node."""

    thread_id: str
    checkpoint_id: str
    task_id: str
    node: str
    attempt: int


def graph_effect_key(run_id: str, call: EffectCall, effect: str, ordinal: int) -> str:
    """The idempotency key of the ``ordinal``-th effect call (0-based) of a task attempt.

    Never change it: providers remember keys, so another derivation would make a resumed graph
    send a second key for an effect that already happened. It depends on the run, checkpoint,
    task, node, effect name and ordinal — never on the attempt, the process or the time.
    """
    check_name("effect", effect)
    digest = hashlib.sha256(
        canonical_json(
            {
                "checkpoint": call.checkpoint_id,
                "effect": effect,
                "node": call.node,
                "ordinal": ordinal,
                "run": run_id,
                "task": call.task_id,
            }
        )
    ).hexdigest()
    return f"{KEY_VERSION}-lg-{effect}-o{ordinal}-{digest[:32]}"


def _result(effect: EffectView, *, replayed: bool) -> EffectResult:
    return EffectResult(
        effect=effect.effect,
        key=effect.idempotency_key,
        state=effect.state,
        external_ref=effect.external_ref,
        response_hash=effect.response_hash,
        replayed=replayed,
    )


async def perform_effect(
    services: Services,
    session: ThreadSession,
    call: EffectCall,
    *,
    ordinal: int,
    name: str,
    request: EffectRequest,
    provider_name: str | None,
) -> EffectResult:
    """Perform the ``ordinal``-th effect call of the task at most once; return its outcome."""
    step = await session.step_of(call.checkpoint_id)
    key = graph_effect_key(session.run_id, call, name, ordinal)
    recorded = session.view.effects.get(key)
    if recorded is not None:
        if recorded.identity_hash and recorded.identity_hash != request.identity_hash:
            raise await _mismatch(
                session,
                step=step,
                name=name,
                key=key,
                recorded=recorded.identity_hash,
                new=request.identity_hash,
            )
        if recorded.state in OPEN_EFFECT_STATES:
            await _resolve(services, session, recorded)
            recorded = session.view.effects[key]
        if recorded.state in PERFORMED_STATES:
            session.log.info("effect_replayed", effect=name, key=key, state=recorded.state)
            return _result(recorded, replayed=True)
        if recorded.state == "failed":
            msg = f"the provider refused this effect earlier: {recorded.error}"
            raise EffectFailedError(msg, run_id=session.run_id, step=step, effect=name, key=key)
    return await _send(
        services,
        session,
        step=step,
        ordinal=ordinal,
        name=name,
        key=key,
        request=request,
        provider_name=provider_name,
    )


async def _send(
    services: Services,
    session: ThreadSession,
    *,
    step: int,
    ordinal: int,
    name: str,
    key: str,
    request: EffectRequest,
    provider_name: str | None,
) -> EffectResult:
    """Intent (durable, with the checkpoint before it), call, outcome (rides the next flush)."""
    pname, provider = services.provider(provider_name, run_id=session.run_id)
    payloads = services.payloads
    session.append(
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
    await session.flush()  # invariant 2: the intent is durable before the provider is called
    try:
        answer = await provider.perform(request, key)
    except ProviderConflictError as e:
        told = e.recorded_hash if isinstance(e, ProviderIdentityConflictError) else None
        await _outcome_failed(services, session, step=step, name=name, key=key, why=str(e))
        raise await _mismatch(
            session,
            step=step,
            name=name,
            key=key,
            recorded=told or "(not told)",
            new=request.identity_hash,
        ) from e
    except ProviderUnavailableError as e:
        raise await _unknown(services, session, step=step, name=name, key=key, why=str(e)) from e
    except ProviderError as e:
        await _outcome_failed(services, session, step=step, name=name, key=key, why=str(e))
        msg = f"the provider refused the effect: {e}"
        raise EffectFailedError(msg, run_id=session.run_id, step=step, effect=name, key=key) from e
    except Exception as e:  # after a send, any other failure means "we do not know"
        why = f"{type(e).__name__}: {e}"
        raise await _unknown(services, session, step=step, name=name, key=key, why=why) from e
    services.kill.reached("after_provider_commit", session.run_id)
    session.append(
        EffectRecorded,
        step=step,
        effect=name,
        idempotency_key=key,
        outcome="succeeded",
        external_ref=answer.external_ref,
        response_hash=answer.response_hash,
    )
    session.log.info("effect_performed", step=step, effect=name, key=key, ref=answer.external_ref)
    return _result(session.view.effects[key], replayed=False)


async def _resolve(services: Services, session: ThreadSession, effect: EffectView) -> None:
    """Ask the provider what became of an intent with no outcome, and record its answer."""
    name, provider = services.provider(effect.provider or None, run_id=session.run_id)
    key = effect.idempotency_key
    try:
        found = await provider.lookup(effect.kind, key)
    except ProviderError as e:
        raise await _unknown(
            services,
            session,
            step=effect.step,
            name=effect.effect,
            key=key,
            why=f"lookup at {name} failed: {e}",
        ) from e
    if found.result is not None:
        session.append(
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
        session.append(
            EffectReconciled,
            step=effect.step,
            effect=effect.effect,
            idempotency_key=key,
            finding="NOT_LANDED",
            detail=f"{name} has no effect under this key: safe to send with the same key",
        )
    await session.flush()
    session.log.info("effect_resolved", key=key, effect=effect.effect, found=found.found)


async def _outcome_failed(
    services: Services, session: ThreadSession, *, step: int, name: str, key: str, why: str
) -> None:
    session.append(
        EffectRecorded,
        step=step,
        effect=name,
        idempotency_key=key,
        outcome="failed",
        error=services.payloads.text(why),
    )
    await session.flush()


async def _unknown(
    services: Services, session: ThreadSession, *, step: int, name: str, key: str, why: str
) -> EffectUnknownError:
    """Record the outcome as unknown with an alert; the next call of the node looks it up."""
    text = services.payloads.text(why)
    if session.view.effects[key].state == "intended":
        session.append(
            EffectRecorded,
            step=step,
            effect=name,
            idempotency_key=key,
            outcome="unknown",
            error=text,
        )
    session.writer.alert(
        "effect_unknown",
        f"run {session.run_id} step {step} effect {name}: outcome unknown ({text})",
        step=step,
        effect=name,
        key=key,
        action="the next run of the node looks the key up; or reconcile it, then resume",
    )
    await session.flush()
    session.log.warning("effect_unknown", step=step, effect=name, key=key, error=text)
    return EffectUnknownError(
        f"outcome unknown: {text}", run_id=session.run_id, step=step, effect=name, key=key
    )


async def _mismatch(
    session: ThreadSession,
    *,
    step: int,
    name: str,
    key: str,
    recorded: str,
    new: str,
) -> IdentityMismatchError:
    """Alert on a changed identity for the same key and return the error to raise."""
    error = IdentityMismatchError(
        run_id=session.run_id, step=step, effect=name, key=key, recorded_hash=recorded, new_hash=new
    )
    session.writer.alert(
        "identity_mismatch",
        str(error),
        step=step,
        effect=name,
        key=key,
        action="the node changed an effect's identity fields on a re-run: fix the code",
    )
    await session.flush()
    session.log.error("identity_mismatch", step=step, effect=name, key=key)
    return error
