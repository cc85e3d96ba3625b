"""The ``agentledger`` command: one argparse dispatcher over every package's ``register``.

A package contributes commands with ``register(subparsers) -> None``, adding a subparser and
``set_defaults(run=handler)``; the handler takes the parsed namespace and returns an exit code
(or a coroutine returning one, which is run with ``asyncio.run``). Handlers build their own
Settings (the CLI is the edge). Errors raised on purpose (AgentLedgerError) and invalid settings
are printed as one clear line on stderr with exit code 2, never as a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import re
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_settings import SettingsError

from agentledger.errors import AgentLedgerError
from agentledger.logdefaults import configure_logging as configure_logging  # noqa: PLC0414  # re-export
from agentledger.settings import unknown_variables
from agentledger.telemetry.otel_setup import TracingSettings, configure_tracing

Handler = Callable[[argparse.Namespace], int | Coroutine[Any, Any, int]]

# One line per package that contributes commands.
COMMAND_MODULES: tuple[str, ...] = (
    "agentledger.stack.commands",
    "agentledger.bus.commands",
    "agentledger.providers.commands",
    "agentledger.reconciler.commands",
    "agentledger.projector.commands",
    "agentledger.demo.commands",
    "agentledger.fleet.commands",
    "agentledger.console.commands",
)

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
ENV_PREFIX = "AGENTLEDGER_"


def build_parser() -> argparse.ArgumentParser:
    """The parser with every package's subcommands registered."""
    parser = argparse.ArgumentParser(
        prog="agentledger",
        description="Durable record of AI-agent runs on Kafka, with resume views in Redis.",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log level of the structured logs on stderr (default INFO)",
    )
    parser.add_argument(
        "--log-format",
        default="console",
        choices=("console", "json"),
        help="render logs for people (console) or machines (json)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def describe_validation_error(error: ValidationError) -> str:
    """One line naming each invalid environment variable and what is wrong with it."""
    parts = []
    for item in error.errors():
        reason = str(item["msg"]).removeprefix("Value error, ")
        if not item["loc"]:  # a check across settings names its variables itself
            parts.append(reason)
            continue
        field = str(item["loc"][0])
        var = f"{ENV_PREFIX}{field.upper()}"
        parts.append(reason if var in reason else f"{var}={item.get('input')!r}: {reason}")
    return "invalid settings: " + "; ".join(parts)


def describe_settings_error(error: SettingsError) -> str:
    """One line naming the variable pydantic-settings could not parse (JSON fields), and why."""
    match = re.search(r'field "([^"]+)"', str(error))
    var = f"{ENV_PREFIX}{match.group(1).upper()}" if match else "a setting"
    cause = f": {error.__cause__}" if error.__cause__ is not None else ""
    return f"invalid settings: {var} is not valid JSON{cause}"


def _fail(message: str) -> int:
    """Print one error on stderr and return the error exit code."""
    sys.stderr.write(f"agentledger: error: {message}\n")
    return EXIT_ERROR


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the chosen command, map expected errors to exit code 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    handler: Handler = args.run
    typo = unknown_variables(os.environ)
    if typo is not None:
        return _fail(typo)
    try:
        configure_tracing(TracingSettings(), f"agentledger-{args.command}")
        outcome = handler(args)
        code: int = asyncio.run(outcome) if isinstance(outcome, Coroutine) else outcome
    except ValidationError as e:
        return _fail(describe_validation_error(e))
    except SettingsError as e:
        return _fail(describe_settings_error(e))
    except AgentLedgerError as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code


def main() -> int:
    """Console-script entry point."""
    return run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
