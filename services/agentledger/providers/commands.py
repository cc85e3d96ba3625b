"""CLI commands of the providers package: ``agentledger sandbox serve``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from agentledger.providers.sandbox.settings import SandboxSettings


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sandbox serve`` to the agentledger command line."""
    sandbox = subparsers.add_parser(
        "sandbox", help="the sandbox effect provider (payments, emails, tickets)"
    )
    commands = sandbox.add_subparsers(dest="sandbox_command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve the sandbox provider over HTTP until SIGTERM",
        description=(
            "Serve a payment/email/ticket API with Stripe-like idempotency, lookups by key "
            "and fault injection, keeping its effects in a SQLite file. Prints one JSON line "
            '{"event": "sandbox_listening", "url": ...} on stdout when ready.'
        ),
    )
    serve.add_argument("--port", type=int, help="TCP port (0 = any free port; default 8765)")
    serve.add_argument("--db", type=Path, help="SQLite file (default .agentledger/sandbox.sqlite3)")
    serve.add_argument("--host", help="interface to bind (default 127.0.0.1)")
    serve.add_argument(
        "--synchronous",
        choices=["NORMAL", "FULL"],
        help="SQLite fsync level of effect commits (default FULL)",
    )
    serve.add_argument(
        "--faults",
        help="""fault rules armed at start, JSON: '[{"mode": "down"}]' or '{"latency_ms": 10}'""",
    )
    serve.set_defaults(run=run_serve)


def sandbox_settings(args: argparse.Namespace) -> SandboxSettings:
    """SandboxSettings from the environment, overridden by the flags given."""
    overrides: dict[str, Any] = {}
    if args.port is not None:
        overrides["sandbox_port"] = args.port
    if args.db is not None:
        overrides["sandbox_db"] = args.db
    if args.host is not None:
        overrides["sandbox_host"] = args.host
    if args.synchronous is not None:
        overrides["sandbox_synchronous"] = args.synchronous
    if args.faults:
        overrides["sandbox_faults"] = args.faults
    return SandboxSettings(**overrides)


async def run_serve(args: argparse.Namespace) -> int:
    """Entry point of ``agentledger sandbox serve``; serves until SIGTERM, then returns 0."""
    # Imported here so that `agentledger --help` does not load aiohttp's server.
    from agentledger.providers.sandbox.service import serve  # noqa: PLC0415

    await serve(sandbox_settings(args), announce=sys.stdout)
    return 0
