"""The console's live stream (``GET /live``) ends when the console stops or its client leaves."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

from agentledger.console.server import running_console
from agentledger.console.testing import console_settings, reconciler_settings
from agentledger.fleet.testing import wait_until
from agentledger.settings import CommonSettings

pytestmark = pytest.mark.integration
WAIT_S = 10.0


def _awaiting(task: asyncio.Task[Any]) -> set[str]:
    """The qualified names of the coroutines ``task`` is suspended in, outermost first."""
    names: set[str] = set()
    coro: Any = task.get_coro()
    while coro is not None:
        code = getattr(coro, "cr_code", None)
        if code is None:
            break
        names.add(code.co_qualname)
        coro = coro.cr_await
    return names


def live_streams() -> int:
    """How many tasks of this process are inside the console's live stream handler."""
    return sum(1 for t in asyncio.all_tasks() if "Console._live" in _awaiting(t))


async def first_mark(http: aiohttp.ClientSession, url: str) -> aiohttp.ClientResponse:
    """Open ``/live`` and read its first event; the response, still open."""
    response = await http.get(f"{url}/live")
    assert response.status == 200
    assert (await response.content.readline()).startswith(b"data: ")
    return response


async def test_stopping_the_console_ends_its_live_streams(ledger_settings: CommonSettings) -> None:
    """A client is still reading /live when the console stops: its stream has ended by the time
    the console is down (none is left polling Redis after the console's reads closed)."""
    console = console_settings(ledger_settings, console_live_interval_s=0.2)
    async with aiohttp.ClientSession() as http:
        async with running_console(console, reconciler_settings(ledger_settings)) as url:
            response = await first_mark(http, url)
            assert live_streams() == 1
        assert live_streams() == 0
        response.close()


async def test_a_client_leaving_ends_its_live_stream(ledger_settings: CommonSettings) -> None:
    """A browser closing the page (its connection) ends the stream on the server, while the
    console goes on serving (aiohttp does not cancel the handler of a client that left)."""
    console = console_settings(ledger_settings, console_live_interval_s=0.2)
    async with running_console(console, reconciler_settings(ledger_settings)) as url:
        async with aiohttp.ClientSession() as http:
            response = await first_mark(http, url)
            assert live_streams() == 1
            response.close()

        async def count() -> int:
            return live_streams()

        assert await wait_until(count, lambda n: n == 0, timeout_s=WAIT_S, poll_s=0.05) == 0
        async with aiohttp.ClientSession() as http:
            (await first_mark(http, url)).close()  # still serving
