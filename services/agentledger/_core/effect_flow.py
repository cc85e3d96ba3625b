"""The one effect flow: intent (durable), provider call, outcome; an open intent is looked up.

The SDK (:mod:`agentledger.worker.effects`) and the LangGraph saver
(:mod:`agentledger.integrations.langgraph.effects`) both run it. Each derives its own
idempotency key and finds what is recorded under it; a small subclass of :class:`EffectFlow`
supplies the few steps that differ: the writer it appends through, whether the run pauses,
the checks around an intent, how a failed lookup is recorded, and the wording of its alerts.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from agentledger._core.lookup import decide
from agentledger._core.session import Services
from agentledger._core.spec import EffectResult
from agentledger.alerts.codes import EFFECT_IDENTITY_MISMATCH, EFFECT_UNKNOWN, AlertCode
from agentledger.errors import (
    EffectFailedError,
    EffectUnknownError,
    IdentityMismatchError,
    ProviderConflictError,
    ProviderError,
    ProviderUnavailableError,
)
from agentledger.events.models import (
    Alert,
    EffectIntended,
    EffectReconciled,
    EffectRecorded,
    RunEvent,
    Severity,
)
from agentledger.providers.hashing import without_plain_hashes
from agentledger.providers.protocol import EffectRequest, LookupResult
from agentledger.telemetry.tracing import (
    EFFECT,
    EFFECT_KEY,
    STEP,
    child_span,
    outcome_of,
    set_outcome,
)
from agentledger.views import OPEN_EFFECT_STATES, PERFORMED_STATES, EffectView, RunView

E = TypeVar("E", bound=RunEvent)


@dataclass(frozen=True)
class EffectAsk:
    """One effect call: effect ``ordinal`` of ``step``, named ``name``, sent under ``key``."""

    step: int
    ordinal: int
    name: str
    key: str
    request: EffectRequest
    provider_name: str | None


class EffectWriter(Protocol):
    """Where the flow queues its events and alerts, and what makes them durable."""

    def append(self, cls: type[E], **fields: Any) -> E:
        """Queue one event of the run (folded into the session's view at once)."""
        ...

    def alert(
        self,
        code: AlertCode,
        summary: str,
        *,
        severity: Severity | None = None,
        key: str | None = None,
        **fields: Any,
    ) -> Alert:
        """Queue an alert about the run."""
        ...

    def close_alert(
        self, code: AlertCode, reason: str, *, key: str | None = None, **fields: Any
    ) -> Alert:
        """Queue the closed event of the run's alert ``code`` about ``key``."""
        ...

    async def flush(self) -> None:
        """Publish everything queued so far."""
        ...


class EffectSession(Protocol):
    """What the flow reads from the session it runs in: the run's id, its view, its logger."""

    @property
    def run_id(self) -> str:
        """The run's id."""
        ...

    @property
    def view(self) -> RunView:
        """The run as this writer knows it (every append folded in)."""
        ...

    @property
    def log(self) -> Any:
        """A structlog logger with the run bound."""
        ...


@dataclass(frozen=True)
class Wording:
    """The texts that differ between flows: the unknown error and the alerts' actions."""

    unknown_error: str
    unknown_action: str
    mismatch_action: str
    not_told: str


S = TypeVar("S", bound=EffectSession)


def effect_result(effect: EffectView, *, replayed: bool) -> EffectResult:
    """What an effect call returns, from the effect as recorded."""
    return EffectResult(
        effect=effect.effect,
        key=effect.idempotency_key,
        state=effect.state,
        external_ref=effect.external_ref,
        response_hash=effect.response_hash,
        replayed=replayed,
    )


class EffectFlow(ABC, Generic[S]):
    """Intent before the call, the caller's key on every retry, never a guess (invariants 2-4)."""

    wording: ClassVar[Wording]
    #: Flush a failed outcome and a lookup's finding at once (else they ride the next flush).
    flush_outcomes: ClassVar[bool] = False
    #: The log level of ``effect_performed``.
    performed_level: ClassVar[str] = "info"

    def __init__(self, services: Services, session: S) -> None:
        self.services = services
        self.session = session

    # --- what differs between flows -------------------------------------------------------

    @abstractmethod
    def writer(self) -> EffectWriter:
        """The writer to append through (raises if the run cannot be written to)."""

    async def before_intent(self, step: int) -> None:
        """Checks before an intent is written (none by default)."""
        del step

    def intent_queued(self, step: int, ordinal: int, key: str) -> None:
        """Called once the intent is queued, before it is flushed (nothing by default)."""
        del step, ordinal, key

    def pause(self, reason: str, step: int, payload: dict[str, str]) -> None:
        """Queue the run's pause before the alert (by default the run is not paused)."""
        del reason, step, payload

    def replayed(
        self, recorded: EffectView, request: EffectRequest, *, step: int, name: str, key: str
    ) -> None:
        """Called when a performed effect is returned instead of sent again."""
        del request
        self.session.log.info("effect_replayed", effect=name, key=key, state=recorded.state)

    async def lookup_failed(
        self, writer: EffectWriter, effect: EffectView, provider: str, error: ProviderError
    ) -> EffectUnknownError:
        """Record that ``provider`` could not be asked about ``effect``; return the error."""
        del writer
        return await self.unknown(
            step=effect.step,
            name=effect.effect,
            key=effect.idempotency_key,
            why=f"lookup at {provider} failed: {error}",
            record=effect.state == "intended",
        )

    # --- the flow -------------------------------------------------------------------------

    async def perform(self, ask: EffectAsk, recorded: EffectView | None) -> EffectResult:
        """Perform ``ask`` at most once under its key, given what is ``recorded`` for it."""
        attrs = {STEP: ask.step, EFFECT: ask.name, EFFECT_KEY: ask.key}
        outcome = "error"
        with child_span("agentledger.effect", self.session.run_id, attrs) as span:
            try:
                result = await self._perform(ask, recorded)
                outcome = "replayed" if result.replayed else result.state
            except BaseException as e:
                outcome = outcome_of(e)
                raise
            finally:
                set_outcome(span, outcome)
                if self.services.metrics is not None:
                    self.services.metrics.effect(outcome)
            return result

    async def _perform(self, ask: EffectAsk, recorded: EffectView | None) -> EffectResult:
        session = self.session
        step, name, key, request = ask.step, ask.name, ask.key, ask.request
        hasher = self.services.payloads.hasher
        if recorded is not None:
            known = recorded.identity_hash
            if known and not hasher.identity_matches(known, request.identity):
                raise await self.mismatch(
                    step=step,
                    name=name,
                    key=key,
                    recorded=known,
                    new=hasher.identity(request.identity),
                )
            if recorded.state in OPEN_EFFECT_STATES:
                await self.resolve(recorded)
                recorded = session.view.effects[key]
            if recorded.state in PERFORMED_STATES:
                self.replayed(recorded, request, step=step, name=name, key=key)
                return effect_result(recorded, replayed=True)
            if recorded.state == "failed":
                msg = f"the provider refused this effect earlier: {recorded.error}"
                raise EffectFailedError(msg, run_id=session.run_id, step=step, effect=name, key=key)
        return await self.send(ask)

    async def send(self, ask: EffectAsk) -> EffectResult:
        """Intent (durable), call, outcome (queued; it rides the next flush)."""
        session = self.session
        step, ordinal, name, key, request = ask.step, ask.ordinal, ask.name, ask.key, ask.request
        await self.before_intent(step)
        pname, provider = self.services.provider(ask.provider_name, run_id=session.run_id)
        writer = self.writer()
        payloads = self.services.payloads
        identity_hash, payload_hash = payloads.hasher.intent(request.identity, request.free_text)
        writer.append(
            EffectIntended,
            step=step,
            ordinal=ordinal,
            effect=name,
            provider=pname,
            kind=request.kind,
            idempotency_key=key,
            identity_hash=identity_hash,
            payload_hash=payload_hash,
            request_json=payloads.inline(
                {"identity": request.identity, "free_text": request.free_text}
            ),
        )
        self.intent_queued(step, ordinal, key)
        await writer.flush()  # invariant 2: the intent is durable before the provider is called
        metrics = self.services.metrics
        if metrics is not None:
            metrics.open_intents.inc()
        try:
            answer = await provider.perform(request, key)
        except ProviderUnavailableError as e:
            raise await self.unknown(step=step, name=name, key=key, why=str(e), record=True) from e
        except ProviderConflictError as e:
            # the provider's message names its own plain identity hashes: not for the log
            why = without_plain_hashes(str(e))
            await self._failed(writer, step=step, name=name, key=key, why=why)
            raise await self.mismatch(
                step=step,
                name=name,
                key=key,
                recorded=self.wording.not_told,
                new=payloads.hasher.identity(request.identity),
            ) from e
        except ProviderError as e:
            await self._failed(writer, step=step, name=name, key=key, why=str(e))
            msg = f"the provider refused the effect: {e}"
            raise EffectFailedError(
                msg, run_id=session.run_id, step=step, effect=name, key=key
            ) from e
        except Exception as e:  # after a send, any other failure means "we do not know"
            why = f"{type(e).__name__}: {e}"
            raise await self.unknown(step=step, name=name, key=key, why=why, record=True) from e
        finally:
            if metrics is not None:
                metrics.open_intents.dec()
        self.services.kill.reached("after_provider_commit", session.run_id)
        writer.append(
            EffectRecorded,
            step=step,
            effect=name,
            idempotency_key=key,
            outcome="succeeded",
            external_ref=answer.external_ref,
            response_hash=answer.response_hash,
        )
        performed = getattr(session.log, self.performed_level)
        performed("effect_performed", step=step, effect=name, key=key, ref=answer.external_ref)
        return effect_result(session.view.effects[key], replayed=False)

    async def resolve(self, effect: EffectView) -> None:
        """Record what the provider says became of an open intent; raise if it cannot tell.

        The answer is read by the core's one lookup decision (:func:`decide`): an effect found
        under the key with another identity is an identity mismatch, never LANDED.
        """
        attrs = {STEP: effect.step, EFFECT: effect.effect, EFFECT_KEY: effect.idempotency_key}
        with child_span("agentledger.effect.lookup", self.session.run_id, attrs) as span:
            await self._resolve(effect)
            found = self.session.view.effects.get(effect.idempotency_key)
            set_outcome(span, found.state if found is not None else "resolved")

    async def _resolve(self, effect: EffectView) -> None:
        writer = self.writer()
        name, provider = self.services.provider(effect.provider or None, run_id=self.session.run_id)
        key = effect.idempotency_key
        was_unknown = effect.state == "unknown"  # this flow alerted when it became unknown
        answer: LookupResult | ProviderError
        try:
            answer = await provider.lookup(effect.kind, key)
        except ProviderError as e:
            answer = e
        resolution = decide(effect, answer, self.services.payloads.hasher)
        cause = answer if isinstance(answer, ProviderError) else None
        if resolution.identity_mismatch:
            if effect.state == "intended":
                self.append_unknown(writer, effect, f"{resolution.detail} (at {name})")
            raise await self.mismatch(
                step=effect.step,
                name=effect.effect,
                key=key,
                recorded=resolution.found_identity_hash or self.wording.not_told,
                new=effect.identity_hash,
            ) from cause
        if cause is not None:
            raise await self.lookup_failed(writer, effect, name, cause) from cause
        if resolution.finding == "LANDED":
            writer.append(
                EffectReconciled,
                step=effect.step,
                effect=effect.effect,
                idempotency_key=key,
                finding="LANDED",
                external_ref=resolution.external_ref,
                response_hash=resolution.response_hash,
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
        if was_unknown:
            writer.close_alert(
                EFFECT_UNKNOWN,
                f"settled on resume: {resolution.finding} at {name}",
                key=key,
                step=effect.step,
                effect=effect.effect,
            )
        if self.flush_outcomes:
            await writer.flush()
        found = resolution.finding == "LANDED"
        self.session.log.info("effect_resolved", key=key, effect=effect.effect, found=found)

    def append_unknown(self, writer: EffectWriter, effect: EffectView, detail: str) -> None:
        """Queue the UNKNOWN finding of a lookup about ``effect`` (``detail`` is redacted)."""
        writer.append(
            EffectReconciled,
            step=effect.step,
            effect=effect.effect,
            idempotency_key=effect.idempotency_key,
            finding="UNKNOWN",
            detail=self.services.payloads.text(detail),
        )

    async def unknown(
        self, *, step: int, name: str, key: str, why: str, record: bool
    ) -> EffectUnknownError:
        """Record the outcome as unknown (if ``record``), pause if the flow does, alert."""
        session = self.session
        writer = self.writer()
        text = self.services.payloads.text(why)
        if record:
            writer.append(
                EffectRecorded,
                step=step,
                effect=name,
                idempotency_key=key,
                outcome="unknown",
                error=text,
            )
        self.pause("effect_unknown", step, {"effect": name, "key": key, "error": text})
        writer.alert(
            EFFECT_UNKNOWN,
            f"run {session.run_id} step {step} effect {name}: outcome unknown ({text})",
            step=step,
            effect=name,
            key=key,
            action=self.wording.unknown_action,
        )
        await writer.flush()
        session.log.warning("effect_unknown", step=step, effect=name, key=key, error=text)
        return EffectUnknownError(
            f"{self.wording.unknown_error}: {text}",
            run_id=session.run_id,
            step=step,
            effect=name,
            key=key,
        )

    async def mismatch(
        self, *, step: int, name: str, key: str, recorded: str, new: str
    ) -> IdentityMismatchError:
        """Stop on a changed identity under one key (pause if the flow does, critical alert)."""
        session = self.session
        writer = self.writer()
        error = IdentityMismatchError(
            run_id=session.run_id,
            step=step,
            effect=name,
            key=key,
            recorded_hash=recorded,
            new_hash=new,
        )
        payload = {"effect": name, "key": key, "recorded_hash": recorded, "new_hash": new}
        self.pause("identity_mismatch", step, payload)
        writer.alert(
            EFFECT_IDENTITY_MISMATCH,
            str(error),
            step=step,
            effect=name,
            key=key,
            action=self.wording.mismatch_action,
        )
        await writer.flush()
        session.log.error("identity_mismatch", step=step, effect=name, key=key)
        return error

    async def _failed(
        self, writer: EffectWriter, *, step: int, name: str, key: str, why: str
    ) -> None:
        writer.append(
            EffectRecorded,
            step=step,
            effect=name,
            idempotency_key=key,
            outcome="failed",
            error=self.services.payloads.text(why),
        )
        if self.flush_outcomes:
            await writer.flush()
