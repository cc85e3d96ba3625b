"""The service log formats: what an operator reads when something failed."""

from __future__ import annotations

import io
import json

import structlog

from agentledger.logdefaults import configure_logging


def test_a_json_log_line_carries_the_traceback_of_a_logged_exception() -> None:
    """``log.exception`` in JSON format writes the traceback as text, not ``exc_info: true``."""
    buffer = io.StringIO()
    configure_logging("INFO", "json", stream=buffer)
    try:
        try:
            raise ValueError("the cause")
        except ValueError:
            structlog.get_logger().exception("group_commit_crashed")
        line = json.loads(buffer.getvalue().splitlines()[-1])
    finally:
        structlog.reset_defaults()
    assert line["event"] == "group_commit_crashed"
    assert "exc_info" not in line
    assert "ValueError: the cause" in line["exception"]
    assert "Traceback (most recent call last)" in line["exception"]
