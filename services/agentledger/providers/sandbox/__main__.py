"""``python -m agentledger.providers.sandbox serve …``: the sandbox without the whole CLI.

:class:`~agentledger.providers.sandbox.process.SandboxProcess` starts the sandbox this way: only
this package's command is registered, so Kafka, faust and Redis clients are never imported and
the child is ready sooner. Flags, logging and exit codes are those of ``agentledger``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from pydantic import ValidationError

from agentledger.cli import EXIT_ERROR, describe_validation_error
from agentledger.errors import AgentLedgerError
from agentledger.logdefaults import configure_logging
from agentledger.providers.commands import register


def main(argv: list[str] | None = None) -> int:
    """Parse ``serve`` and its flags exactly as ``agentledger sandbox serve`` does, and run it."""
    parser = argparse.ArgumentParser(prog="agentledger")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["sandbox", *(sys.argv[1:] if argv is None else argv)])
    configure_logging("INFO", "json")
    try:
        code: int = asyncio.run(args.run(args))
    except ValidationError as e:
        sys.stderr.write(f"sandbox: error: {describe_validation_error(e)}\n")
        return EXIT_ERROR
    except AgentLedgerError as e:
        sys.stderr.write(f"sandbox: error: {e}\n")
        return EXIT_ERROR
    return code


if __name__ == "__main__":
    sys.exit(main())
