"""Where the SDK's logs go when the program configured nothing: stderr, never stdout."""

from __future__ import annotations

import sys
from typing import Any

import structlog


class StderrLoggerFactory:
    """structlog PrintLoggers on the current ``sys.stderr`` (looked up per logger, not once)."""

    def __call__(self, *args: Any) -> structlog.PrintLogger:
        """A logger printing to ``sys.stderr``."""
        del args
        return structlog.PrintLogger(file=sys.stderr)


def logs_on_stderr_by_default() -> None:
    """Send structlog's output to stderr unless the program configured structlog itself.

    structlog prints to stdout by default, where an agent's own output (often JSON for a pipe)
    would be interleaved with ours. A program that configures structlog keeps its choice.
    """
    if not structlog.is_configured():
        structlog.configure(logger_factory=StderrLoggerFactory())
