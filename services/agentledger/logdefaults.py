"""Where logs go: the current stderr, never stdout (the CLI's configuration, and the default
when a program said nothing)."""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

from agentledger.outage import ConnectionNoiseFilter


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


def configure_logging(
    level: str = "INFO", fmt: str = "console", stream: TextIO | None = None
) -> None:
    """Structured logs on stderr (stdout is kept for output meant to be parsed or eval'ed)."""
    out: TextIO = stream if stream is not None else CurrentStderr()  # type: ignore[assignment]
    numeric = logging.getLevelNamesMapping()[level.upper()]
    # JSON lines carry a logged exception's traceback as text (``exception``); the console
    # renderer prints it itself.
    rendering: list[structlog.typing.Processor] = (
        [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()]
        if fmt == "json"
        else [structlog.dev.ConsoleRenderer(colors=False)]
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *rendering,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=out),
        cache_logger_on_first_use=False,
    )
    # Third-party libraries (aiokafka, faust) log through the standard library.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=out, force=True)
    for handler in logging.getLogger().handlers:
        # aiokafka logs every reconnection attempt; the outage waiter says it in one line.
        handler.addFilter(ConnectionNoiseFilter())


def warnings_on_stderr_by_default() -> None:
    """For a program that configured no logging: warnings and errors on stderr, nothing else.

    What ``agentledger.connect`` and ``AgentLedgerSaver.from_settings`` do, so the author of a
    small program sees the lines that need them (a ``lease_wait``, a paused run) and stdout
    stays theirs. A program that configures structlog keeps its choice.
    """
    if not structlog.is_configured():
        configure_logging("WARNING")
