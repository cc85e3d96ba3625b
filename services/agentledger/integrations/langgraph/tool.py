"""``effect_tool``: a function that builds an EffectRequest becomes an effect a node can call.

Inside a node of a graph compiled with :class:`AgentLedgerSaver`, calling the wrapped function
records the intent, calls the provider with a key derived from the thread, the checkpoint the
task ran from, the task, the effect and the call's ordinal, and records the outcome. A node that
runs again (crash, retry, interrupt) gets the recorded outcome instead of a second call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec

from langgraph.config import get_config
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.runtime import get_runtime

from agentledger._core.keys import check_name
from agentledger._core.spec import EffectResult
from agentledger.errors import ConfigurationError
from agentledger.integrations.langgraph.effects import EffectCall
from agentledger.integrations.langgraph.saver import AgentLedgerSaver
from agentledger.providers.protocol import EffectRequest

P = ParamSpec("P")
# LangGraph's (private) configurable key for the durability mode of the running graph.
DURABILITY_KEY = "__pregel_durability"


def current_call() -> tuple[Any, EffectCall]:
    """The running graph's checkpointer and where in the graph this call happens."""
    try:
        config = get_config()
    except RuntimeError as e:
        msg = "an effect tool must be called inside a LangGraph node (no runnable config here)"
        raise ConfigurationError(msg) from e
    configurable = config.get(CONF, {})
    if configurable.get(DURABILITY_KEY) == "exit":
        msg = (
            "effect tools need durability='sync' or 'async': with 'exit' the checkpoint a task "
            "runs from is not saved, so a re-run could not find its effects"
        )
        raise ConfigurationError(msg)
    info = get_runtime().execution_info
    if info is None or not info.thread_id:
        msg = "effect tools need a checkpointed graph run with a thread_id in its config"
        raise ConfigurationError(msg)
    node = str(config.get("metadata", {}).get("langgraph_node", ""))
    call = EffectCall(
        thread_id=info.thread_id,
        checkpoint_id=info.checkpoint_id,
        task_id=info.task_id,
        node=node,
        attempt=info.node_attempt,
    )
    return configurable.get(CONFIG_KEY_CHECKPOINTER), call


def effect_tool(
    provider: str | None = None, *, name: str | None = None
) -> Callable[
    [Callable[P, EffectRequest | Awaitable[EffectRequest]]],
    Callable[P, Awaitable[EffectResult]],
]:
    """Turn a function returning an :class:`EffectRequest` into an effect performed at most once.

    ``provider`` names one of the saver's providers (None: its only one); ``name`` defaults to
    the function's name and is part of the idempotency key: never rename a deployed effect.
    The wrapper is async, keeps the signature (stack ``langchain_core.tools.tool`` on top to
    give it to a model) and returns an :class:`~agentledger._core.spec.EffectResult`.
    """

    def wrap(
        build: Callable[P, EffectRequest | Awaitable[EffectRequest]],
    ) -> Callable[P, Awaitable[EffectResult]]:
        effect = check_name("effect", name or build.__name__)

        @functools.wraps(build)
        async def call(*args: P.args, **kwargs: P.kwargs) -> EffectResult:
            saver, where = current_call()
            if not isinstance(saver, AgentLedgerSaver):
                msg = (
                    f"effect {effect!r} needs the graph compiled with "
                    f"checkpointer=AgentLedgerSaver, not {type(saver).__name__}"
                )
                raise ConfigurationError(msg)
            built = build(*args, **kwargs)
            request = await built if inspect.isawaitable(built) else built
            if not isinstance(request, EffectRequest):
                msg = f"effect {effect!r} must return an EffectRequest, got {type(request)}"
                raise ConfigurationError(msg)
            return await saver.perform_effect(
                where, name=effect, request=request, provider=provider
            )

        call.__annotations__ = {**call.__annotations__, "return": EffectResult}
        return call

    return wrap
