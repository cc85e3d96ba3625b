"""Serving the console: ``running_console`` (a context manager yielding its URL) and ``serve``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from aiohttp import web

from agentledger.reconciler import ReconcilerSettings

from .actions import ConsoleActions
from .app import Console
from .reads import ConsoleReads
from .settings import ConsoleSettings

_log = structlog.get_logger(__name__)


@asynccontextmanager
async def running_console(
    settings: ConsoleSettings, reconciler: ReconcilerSettings
) -> AsyncIterator[str]:
    """The console listening on ``console_host:console_port`` (0 = a free port); its base URL."""
    async with ConsoleReads(settings) as reads:
        console = Console(settings, reads, ConsoleActions(settings, reconciler))
        # SSE streams never end by themselves: give them a short grace on shutdown.
        runner = web.AppRunner(console.app(), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, settings.console_host, settings.console_port)
            await site.start()
            port = runner.addresses[0][1]
            url = f"http://{settings.console_host}:{port}"
            _log.info(
                "console_listening",
                url=url,
                writable=console.guard.writable,
            )
            yield url
        finally:
            await runner.cleanup()


async def serve(
    settings: ConsoleSettings, reconciler: ReconcilerSettings, stop: asyncio.Event
) -> None:
    """Run the console until ``stop`` is set."""
    async with running_console(settings, reconciler):
        await stop.wait()
