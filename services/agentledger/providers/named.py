"""Providers named in a program: a Provider, an ``http(s)://`` URL, or ``"sandbox"``.

``connect()`` and the LangGraph saver read ``providers={"payments": "sandbox"}`` the same way:
a URL is an HTTP provider (an Idempotency-Key API), ``"sandbox"`` a sandbox served in this
process over ``<state dir>/sandbox/<name>.db`` (so a later process sees what it performed).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path

from agentledger.errors import ConfigurationError
from agentledger.providers.http import HttpProvider
from agentledger.providers.protocol import Provider
from agentledger.providers.sandbox.embedded import EmbeddedSandbox

#: The provider value that serves a sandbox in this process.
SANDBOX = "sandbox"

Given = Provider | str


def check_given(given: Mapping[str, Given]) -> None:
    """Refuse, before anything starts, a value that is neither a Provider, a URL nor sandbox."""
    for name, value in given.items():
        if isinstance(value, Provider) or value == SANDBOX:
            continue
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            continue
        msg = f"provider {name!r}: {value!r} is neither a Provider, an http(s):// URL nor 'sandbox'"
        raise ConfigurationError(msg)


async def open_provider(
    stack: AsyncExitStack, name: str, given: Given, state_dir: Path
) -> Provider:
    """The provider ``given`` names, started on ``stack`` (stopped with it)."""
    check_given({name: given})
    if isinstance(given, Provider):
        return await stack.enter_async_context(given)
    if given == SANDBOX:
        sandbox = await stack.enter_async_context(
            EmbeddedSandbox(state_dir / "sandbox" / f"{name}.db")
        )
        given = sandbox.url
    return await stack.enter_async_context(HttpProvider(given, name=name))


async def open_providers(
    stack: AsyncExitStack, given: Mapping[str, Given], state_dir: Path
) -> dict[str, Provider]:
    """Every provider of ``given``, started on ``stack``."""
    check_given(given)
    return {
        name: await open_provider(stack, name, value, state_dir) for name, value in given.items()
    }
