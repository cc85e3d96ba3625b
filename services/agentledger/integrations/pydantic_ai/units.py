"""One durable unit of a Pydantic AI run = one agentledger step, recorded and replayed in order.

A model request is a step holding one model activity (the response, its tokens and dollars as
cost); it rides with the step's checkpoint, so a request is sent again only if the process died
before that commit. A tool call is a step whose result is the call's outcome; effects it asks
for are keyed by the run, the step the call began in and their ordinal. A call the model is
asked to retry (``ModelRetry``) begins again in a later step but keeps the key step of the call
it retries, so an effect it performed is returned from the record instead of being sent again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import Any

from agentledger.errors import ConfigurationError, ReplayMismatchError
from agentledger.worker import Metered, Payloads, Run, Step

#: The name of every step of a Pydantic AI run; what each step is lives in its result.
UNIT = "unit"
#: Steps planned at a time: the plan grows by doubling when a run needs more.
PLAN_CHUNK = 64
MODEL_ACTIVITY = "model-request"

Body = Callable[[], Awaitable[object]]
Price = Callable[[dict[str, Any], str], float]


@dataclass(frozen=True)
class ToolCall:
    """The tool call running now: its step, and the step its effects' keys are derived from."""

    step: Step
    key_step: int
    tool: str


_RUN: ContextVar[RunUnits | None] = ContextVar("agentledger_pydantic_ai_run", default=None)
_CALL: ContextVar[ToolCall | None] = ContextVar("agentledger_pydantic_ai_call", default=None)


def current_run() -> RunUnits | None:
    """The agentledger run the current Pydantic AI run is recorded in, if any."""
    return _RUN.get()


def current_call(what: str) -> ToolCall:
    """The tool call running now; ConfigurationError outside a tool of a durable run."""
    call = _CALL.get()
    if call is None:
        msg = (
            f"{what} must be called inside a tool of an agent run recorded by agentledger "
            "(run it with agentledger.integrations.pydantic_ai.run_agent)"
        )
        raise ConfigurationError(msg)
    return call


def _tokens(payload: object) -> int:
    """Input plus output tokens of a recorded model response (0 when it says nothing)."""
    usage = _usage(payload)
    return int(usage.get("input_tokens", 0) or 0) + int(usage.get("output_tokens", 0) or 0)


def _usage(payload: object) -> dict[str, Any]:
    if not isinstance(payload, dict):
        return {}
    usage = payload.get("usage")
    if isinstance(usage, dict):
        return usage
    return _usage(payload.get("response"))  # a streamed request wraps its response


def _model_name(payload: object) -> str:
    if not isinstance(payload, dict):
        return ""
    name = payload.get("model_name")
    return name if isinstance(name, str) else _model_name(payload.get("response"))


@dataclass
class RunUnits:
    """The steps of one open run, walked in the order the agent asks for its units."""

    run: Run
    payloads: Payloads
    price: Price | None = None
    index: int = 0
    #: Model requests sent in this process (replayed ones are not sent).
    sent: int = 0
    replayed: int = 0
    _retry_from: dict[str, list[int]] = field(default_factory=dict)
    _retried: dict[str, list[int]] = field(default_factory=dict)

    def enter(self) -> Token[RunUnits | None]:
        """Make this the current run (returns the token for :meth:`leave`)."""
        return _RUN.set(self)

    def leave(self, token: Token[RunUnits | None]) -> None:
        """Stop being the current run."""
        _RUN.reset(token)

    async def _grow_plan(self) -> None:
        if self.index < len(self.run.view.plan):  # the common case: no copy of a long plan
            return
        plan = list(self.run.view.plan)
        grown = [*plan, *([UNIT] * max(len(plan), PLAN_CHUNK))]
        await self.run.revise_plan(grown, f"the agent needs more than {len(plan)} steps")

    async def _step(self, name: str, body: Callable[[Step], Awaitable[dict[str, Any]]]) -> Any:
        """Run (or replay) the next step; its recorded result must be the same unit."""
        await self._grow_plan()
        index = self.index
        recorded = await self.run.step(UNIT, body)
        self.index += 1
        if not isinstance(recorded, dict) or recorded.get("unit") != name:
            got = recorded.get("unit") if isinstance(recorded, dict) else recorded
            msg = f"step {index} was recorded as {got!r}, the agent now asks for {name!r}"
            raise ReplayMismatchError(msg, run_id=self.run.run_id, step=index)
        return recorded

    async def model(self, name: str, body: Body) -> object:
        """A model request: sent once, recorded as an activity with its cost, then reused."""
        index = self.index
        fresh: list[object] = []

        async def request() -> Metered[object]:
            self.sent += 1
            payload = await body()
            usd = self.price(_usage(payload), _model_name(payload)) if self.price else 0.0
            return Metered(payload, tokens=_tokens(payload), usd=usd)

        async def step_body(step: Step) -> dict[str, Any]:
            fresh.append(await step.activity(MODEL_ACTIVITY, request, durable=False))
            return {"unit": name}

        await self._step(name, step_body)
        # Retries asked for by this response's predecessors are answered by the calls it makes.
        self._retry_from, self._retried = self._retried, {}
        if fresh:
            return fresh[0]
        self.replayed += 1
        activity = self.run.view.steps[index].activities[0]
        return await self.payloads.decode(
            activity.result_json, activity.result_ref_uri, activity.result_ref_hash
        )

    async def tool(self, name: str, tool: str, body: Body) -> object:
        """A tool call as a step; a call retrying one the model sent back keeps its key step."""
        waiting = self._retry_from.get(tool)
        key_step = waiting.pop(0) if waiting else self.index

        async def step_body(step: Step) -> dict[str, Any]:
            token = _CALL.set(ToolCall(step, key_step, tool))
            try:
                return {"unit": name, "value": await body()}
            finally:
                _CALL.reset(token)

        value = (await self._step(name, step_body))["value"]
        if isinstance(value, dict) and value.get("kind") == "model_retry":
            self._retried.setdefault(tool, []).append(key_step)
        return value

    async def other(self, name: str, body: Body) -> object:
        """Any other unit (discovery, compaction, event handling): its result is the record."""

        async def step_body(step: Step) -> dict[str, Any]:
            del step
            return {"unit": name, "value": await body()}

        return (await self._step(name, step_body))["value"]
