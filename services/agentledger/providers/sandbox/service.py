"""Run the sandbox provider until SIGTERM/SIGINT, announcing its URL on one stdout line."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from typing import TextIO

import structlog
from aiohttp import web

from agentledger.providers.faults import FaultSet
from agentledger.providers.sandbox.server import create_app
from agentledger.providers.sandbox.settings import SandboxSettings
from agentledger.providers.sandbox.store import SqliteEffectStore

READY_EVENT = "sandbox_listening"
_SHUTDOWN_TIMEOUT_S = 5.0


async def serve(settings: SandboxSettings, *, announce: TextIO | None = None) -> None:
    """Serve until a termination signal; write ``{"event": "sandbox_listening", "url"…}`` first."""
    log = structlog.get_logger(__name__)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        async with SqliteEffectStore(
            settings.sandbox_db, synchronous=settings.sandbox_synchronous
        ) as store:
            app = create_app(store, FaultSet(settings.sandbox_faults))
            runner = web.AppRunner(
                app, access_log=None, handle_signals=False, shutdown_timeout=_SHUTDOWN_TIMEOUT_S
            )
            await runner.setup()
            try:
                site = web.TCPSite(runner, settings.sandbox_host, settings.sandbox_port)
                await site.start()
                host, port = runner.addresses[0][:2]
                url = f"http://{_url_host(str(host))}:{port}"
                log.info(READY_EVENT, url=url, db=str(settings.sandbox_db), pid=os.getpid())
                if announce is not None:
                    line = {"event": READY_EVENT, "url": url, "pid": os.getpid()}
                    announce.write(json.dumps(line) + "\n")
                    announce.flush()
                await stop.wait()
                log.info("sandbox_stopping", url=url)
            finally:
                await runner.cleanup()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
