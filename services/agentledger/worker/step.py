"""Inside a step: recorded activities, effects with idempotency keys, and approval gates."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentledger._core.keys import check_name, intent_hash
from agentledger._core.replay import check_activity
from agentledger._core.session import RunSession
from agentledger._core.spec import EffectResult, Metered
from agentledger.alerts.codes import APPROVAL_CODES
from agentledger.errors import ApprovalError, RunPausedError, UsageError
from agentledger.events.models import ActivityRecorded, RunFinished
from agentledger.providers.hashing import sha256_hex
from agentledger.providers.protocol import EffectRequest
from agentledger.telemetry.tracing import ACTIVITY, STEP, child_span, set_outcome
from agentledger.views import Approval, StepView
from agentledger.worker import approvals
from agentledger.worker.effects import perform_effect

ActivityFn = Callable[[], Awaitable[Any]]


class Step:
    """One attempt at one step; hand it to the step body. Calls must be sequential."""

    def __init__(self, session: RunSession, index: int, name: str, attempt: int) -> None:
        self._session = session
        self.index = index
        self.name = name
        self.attempt = attempt
        self._activities = 0
        self._effects = 0

    @functools.cached_property
    def log(self) -> Any:
        """The run's structlog logger with this step's index, name and attempt bound (bound on
        first use: most steps log nothing at the configured level, DESIGN.md §13, session 19)."""
        return self._session.log.bind(step=self.index, step_name=self.name, attempt=self.attempt)

    @property
    def run_id(self) -> str:
        """The run this step belongs to."""
        return self._session.run_id

    def _recorded(self) -> StepView | None:
        step = self._session.view.steps.get(self.index)
        return step if step is not None and step.attempt == self.attempt else None

    async def activity(
        self, name: str, fn: ActivityFn, *, kind: str = "model", durable: bool = True
    ) -> Any:
        """Run ``fn`` once per attempt and record its result and cost (return a :class:`Metered`
        to charge tokens/dollars). A resumed attempt gets the recorded result, ``fn`` is not run.

        ``durable=True`` (default) commits the record at once, so a crash later in the step
        reuses it; ``durable=False`` lets it ride with the step's next commit (one commit fewer;
        a crash before that commit runs ``fn`` again).
        """
        return await self._record(name, fn, kind=kind, durable=durable, source_uri=None)

    async def read(self, name: str, uri: str, fn: ActivityFn, *, durable: bool = False) -> Any:
        """Read a mutable source once per attempt, recording provenance (uri, sha256, time).

        Reads ride with the step's next commit by default (cheap to redo): the record is
        durable before anything that could depend on it leaves the process (an effect's intent
        or the checkpoint commits it first); a crash before that simply reads again.
        """
        return await self._record(name, fn, kind="read", durable=durable, source_uri=uri)

    async def _record(
        self, name: str, fn: ActivityFn, *, kind: str, durable: bool, source_uri: str | None
    ) -> Any:
        attrs = {STEP: self.index, ACTIVITY: name, "agentledger.activity.kind": kind}
        with child_span("agentledger.activity", self.run_id, attrs) as span:
            recorded_before = self._recorded_activity(self._activities)
            value = await self._record_once(
                name, fn, kind=kind, durable=durable, source_uri=source_uri
            )
            set_outcome(span, "replayed" if recorded_before else "recorded")
            return value

    def _recorded_activity(self, ordinal: int) -> bool:
        recorded = self._recorded()
        return recorded is not None and ordinal in recorded.activities

    async def _record_once(
        self, name: str, fn: ActivityFn, *, kind: str, durable: bool, source_uri: str | None
    ) -> Any:
        check_name("activity", name)
        session = self._session
        ordinal = self._activities
        self._activities += 1
        recorded = self._recorded()
        if recorded is not None:
            check_activity(self.run_id, recorded, ordinal, name)
            done = recorded.activities.get(ordinal)
            if done is not None:
                return await session.services.payloads.decode(
                    done.result_json, done.result_ref_uri, done.result_ref_hash
                )
        await session.check_spending(self.index)
        pending = fn()
        if not inspect.isawaitable(pending):
            msg = (
                f"activity {name!r} of step {self.name!r} returned {type(pending).__name__}, not "
                "an awaitable: make it an `async def` (run blocking code in it with "
                "`await asyncio.to_thread(...)`)"
            )
            raise UsageError(msg, run_id=self.run_id, step=self.index)
        raw = await pending
        value, tokens, usd = (
            (raw.value, raw.tokens, raw.usd) if isinstance(raw, Metered) else (raw, 0, 0.0)
        )
        session.kill_point("mid_activity")
        payloads = session.services.payloads
        recorded_value = await payloads.record(value)
        encoded = recorded_value.encoded
        writer = session.writable()
        provenance: dict[str, Any] = {}
        if source_uri is not None:
            provenance = {
                "source_uri": payloads.text(source_uri),
                # the value redacted once: the redactor is pure, so a second pass was equal
                "content_hash": sha256_hex(recorded_value.redacted),
                "read_at": session.now(),
            }
        writer.append(
            ActivityRecorded,
            step=self.index,
            attempt=self.attempt,
            ordinal=ordinal,
            name=name,
            kind=kind,
            result_json=encoded.json,
            result_ref_uri=encoded.ref_uri,
            result_ref_hash=encoded.ref_hash,
            tokens=tokens,
            usd=usd,
            **provenance,
        )
        if durable:
            session.ensure_lease()
            await writer.flush()
        await session.check_spent(self.index)
        return await payloads.value_of(recorded_value)  # as decoded from the record

    async def effect(
        self,
        name: str,
        request: EffectRequest,
        *,
        provider: str | None = None,
        key_step: int | None = None,
    ) -> EffectResult:
        """Perform an effect at most once, under the key of (run, step, ``name``, ordinal).

        Returns the recorded outcome without sending when an earlier attempt or process
        performed it. Raises EffectUnknownError (run paused) when the provider cannot tell,
        IdentityMismatchError (run paused, alert) when a retry changed identity fields, and
        EffectFailedError when the provider refused the request.

        ``key_step`` (an earlier step) derives the key from that step instead of this one: a
        step that carries on a call begun there (a tool call retried at the model's request)
        gets that call's outcomes instead of performing them again.
        """
        if key_step is not None and not 0 <= key_step <= self.index:
            msg = f"key_step {key_step} must be this step ({self.index}) or an earlier one"
            raise ValueError(msg)
        ordinal = self._effects
        self._effects += 1
        return await perform_effect(
            self._session,
            step=self.index,
            ordinal=ordinal,
            name=name,
            request=request,
            provider_name=provider,
            key_step=key_step,
        )

    async def approval(
        self,
        intent: Mapping[str, Any],
        *,
        ask: str,
        approver: str = "",
        expires_at: int | None = None,
    ) -> Approval:
        """Go ahead only with a valid approval of ``intent`` for this run's generation.

        Without one, the run pauses (RunPausedError, reason ``approval``) until somebody
        records ApprovalDecided; a rejection finishes the run as rejected (ApprovalError); an
        expired, revoked or foreign approval is refused with an alert and asked for again.
        """
        session = self._session
        wanted = intent_hash(intent)
        view = session.view
        verdict = approvals.validate(
            view.approvals,
            generation=view.generation,
            intent_hash=wanted,
            now=session.now(),
            asked_expires_at=expires_at,
        )
        if verdict.usable and verdict.approval is not None:
            return verdict.approval
        writer = session.writable()
        if verdict.status == "rejected":
            writer.append(RunFinished, status="rejected", error=verdict.reason)
            await writer.flush()
            raise ApprovalError(verdict.reason, run_id=self.run_id, step=self.index)
        payload = {"ask": ask, "approver": approver, "intent": intent}
        session.pause(
            "approval", step=self.index, payload=payload, intent_hash=wanted, expires_at=expires_at
        )
        if verdict.status == "pending":
            await writer.flush()
            raise RunPausedError(
                f"waiting for approval: {ask}",
                run_id=self.run_id,
                reason="approval",
                step=self.index,
            )
        writer.alert(
            APPROVAL_CODES[verdict.status],
            f"run {self.run_id} step {self.index}: approval refused ({verdict.reason})",
            severity="warning",
            step=self.index,
            action="approve the intent again for the current generation",
        )
        await writer.flush()
        raise ApprovalError(
            f"approval refused: {verdict.reason}", run_id=self.run_id, step=self.index
        )
