"""Effects from inside a tool: intent first, a key per call, the recorded outcome on any re-run.

:func:`perform_effect` performs an :class:`~agentledger.EffectRequest` through one of the
ledger's providers, from inside a tool of a recorded run. :func:`effect_tool` turns a function
that builds a request into such a tool, optionally behind a person's approval.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ParamSpec

from agentledger._core.keys import check_name
from agentledger.errors import ConfigurationError
from agentledger.integrations.pydantic_ai.units import current_call
from agentledger.providers.protocol import EffectRequest
from agentledger.worker import EffectResult

P = ParamSpec("P")


async def perform_effect(
    name: str, request: EffectRequest, *, provider: str | None = None
) -> EffectResult:
    """Perform ``request`` at most once from the tool running now; return its recorded outcome.

    The idempotency key is derived from the run, the step the tool call began in and the
    effect's ordinal in the call (a call the model retries keeps its first step), so a resumed
    run, a replayed step or a retried call gets the recorded outcome or the provider's answer
    to a lookup instead of a second call.
    """
    call = current_call("perform_effect")
    return await call.step.effect(name, request, provider=provider, key_step=call.key_step)


async def require_approval(intent: Mapping[str, Any], *, ask: str, approver: str = "") -> None:
    """Go on only once a person approved ``intent`` for this run; else the run pauses.

    Raises RunPausedError (the run waits until ``Ledger.decide`` records a decision and the run
    is resumed) or ApprovalError (rejected: the run is finished as rejected).
    """
    call = current_call("require_approval")
    await call.step.approval(intent, ask=ask, approver=approver)


def outcome(result: EffectResult) -> dict[str, Any]:
    """What an effect tool tells the model: the provider's reference and whether it replayed."""
    return {
        "effect": result.effect,
        "state": result.state,
        "ref": result.external_ref,
        "replayed": result.replayed,
    }


def effect_tool(
    provider: str | None = None, *, name: str | None = None, approval: str | None = None
) -> Callable[
    [Callable[P, EffectRequest | Awaitable[EffectRequest]]],
    Callable[P, Awaitable[dict[str, Any]]],
]:
    """Turn a function returning an :class:`EffectRequest` into a tool whose effect runs once.

    Register the result like any tool (``agent.tool_plain(refund)``, ``Agent(tools=[refund])``,
    or ``agent.tool`` when the function takes a ``RunContext`` first). ``name`` (default: the
    function's) is part of the idempotency key: never rename a deployed effect. With
    ``approval`` the run pauses for a person's approval of the request's identity fields first.
    The tool returns :func:`outcome` to the model.
    """

    def wrap(
        build: Callable[P, EffectRequest | Awaitable[EffectRequest]],
    ) -> Callable[P, Awaitable[dict[str, Any]]]:
        effect = check_name("effect", name or build.__name__)

        @functools.wraps(build)
        async def call(*args: P.args, **kwargs: P.kwargs) -> dict[str, Any]:
            built = build(*args, **kwargs)
            request = await built if inspect.isawaitable(built) else built
            if not isinstance(request, EffectRequest):
                msg = f"effect {effect!r} must return an EffectRequest, got {type(request)}"
                raise ConfigurationError(msg)
            if approval is not None:
                intent = {"effect": effect, "kind": request.kind, "identity": request.identity}
                await require_approval(intent, ask=approval)
            return outcome(await perform_effect(effect, request, provider=provider))

        call.__annotations__ = {**call.__annotations__, "return": dict[str, Any]}
        return call

    return wrap
