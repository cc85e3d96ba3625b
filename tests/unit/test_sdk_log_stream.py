"""The SDK logs to stderr by default, so a program's stdout stays its own."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import asyncio, json, structlog
from agentledger.testing import LedgerEnvironment

async def main():
    async with LedgerEnvironment() as env:
        env.ledger()
        structlog.get_logger("agentledger.worker").warning("sdk_log_line", run_id="r1")
    print(json.dumps({"result": 1}))

asyncio.run(main())
"""


def test_an_sdk_program_gets_our_logs_on_stderr_and_its_stdout_clean() -> None:
    """A program using the SDK without configuring logs prints only its own output on stdout."""
    child = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, check=True, timeout=120
    )
    assert child.stdout.strip() == '{"result": 1}'
    assert "sdk_log_line" in child.stderr


def test_a_program_that_configured_structlog_keeps_its_choice() -> None:
    """If the program configured structlog (here: stdout) before, the SDK leaves it alone."""
    to_stdout = "structlog.configure(logger_factory=structlog.PrintLoggerFactory())\n"
    configured = PROGRAM.replace("from agentledger.testing", to_stdout + "from agentledger.testing")
    child = subprocess.run(
        [sys.executable, "-c", configured], capture_output=True, text=True, check=True, timeout=120
    )
    assert "sdk_log_line" in child.stdout
