"""CLI: ``agentledger console [--host H] [--port P]``."""

from __future__ import annotations

import argparse
import asyncio
import signal

from agentledger.reconciler import ReconcilerSettings
from agentledger.stack.resolve import resolve_settings

from .server import serve
from .settings import ConsoleSettings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``console``."""
    console = subparsers.add_parser(
        "console",
        help="the operator console: runs, effects, alerts and approvals in a web page",
        description="Serves HTML pages over the views `runs list|show` and `alerts list` read. "
        "Read-only unless AGENTLEDGER_CONSOLE_TOKEN is set; then approve, reject, settle and "
        "ack go through the same code as the CLI. Binds 127.0.0.1 unless told otherwise.",
    )
    console.add_argument("--host", default=None, help="address to bind (default 127.0.0.1)")
    console.add_argument("--port", type=int, default=None, help="port (default 8470)")
    console.set_defaults(run=_console)


async def _console(args: argparse.Namespace) -> int:
    settings = await resolve_settings(ConsoleSettings())
    overrides = {
        k: v for k, v in (("console_host", args.host), ("console_port", args.port)) if v is not None
    }
    settings = settings.model_copy(update=overrides)
    reconciler = await resolve_settings(ReconcilerSettings())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await serve(settings, reconciler, stop)
    return 0
