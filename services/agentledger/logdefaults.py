"""Where logs go when nothing else was said: the current stderr, never stdout."""

from __future__ import annotations

import sys
from typing import Any

import structlog


class CurrentStderr:
    """A stream that writes to whatever ``sys.stderr`` is at the time of each write.

    A logger configured once keeps working after ``sys.stderr`` is replaced (a test's capture,
    a daemon redirecting it), instead of writing to a stream that was closed since.
    """

    def write(self, text: str) -> int:
        """Write ``text`` to the current stderr."""
        return sys.stderr.write(text)

    def flush(self) -> None:
        """Flush the current stderr."""
        sys.stderr.flush()


class StderrLoggerFactory:
    """structlog PrintLoggers on the current ``sys.stderr`` (looked up at every write)."""

    def __call__(self, *args: Any) -> structlog.PrintLogger:
        """A logger printing to the current stderr."""
        del args
        return structlog.PrintLogger(file=CurrentStderr())  # type: ignore[arg-type]


def logs_on_stderr_by_default() -> None:
    """Send structlog's output to stderr unless the program configured structlog itself.

    structlog prints to stdout by default, where an agent's own output (often JSON for a pipe)
    would be interleaved with ours. A program that configures structlog keeps its choice.
    """
    if not structlog.is_configured():
        structlog.configure(logger_factory=StderrLoggerFactory())
