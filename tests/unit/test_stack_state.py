"""The stack's state file and status lines."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentledger.errors import StackError
from agentledger.stack.state import (
    ComponentStatus,
    Endpoints,
    Health,
    KafkaRecord,
    RedisRecord,
    StackState,
    StackStatus,
    kafka_bootstrap,
    parse_state,
    redis_url,
    render_state,
)

STARTED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _state() -> StackState:
    return StackState(
        kafka=KafkaRecord(
            pid=10,
            proc_start=99,
            port=41001,
            controller_port=41002,
            cluster_id="abc",
            started_at=STARTED,
            version="4.1.1",
        ),
        redis=RedisRecord(pid=11, proc_start=98, port=41003, started_at=STARTED, version="7.0.15"),
    )


def test_state_round_trips_through_json(tmp_path: Path) -> None:
    """What render_state writes, parse_state reads back unchanged."""
    state = _state()
    assert parse_state(render_state(state), tmp_path / "stack.json") == state


@pytest.mark.parametrize(
    "text",
    ["{not json", '{"format": 1, "kafka": {"pid": "x"}}', '{"format": 1, "surprise": 1}'],
)
def test_corrupt_state_is_a_stack_error_naming_the_file(tmp_path: Path, text: str) -> None:
    """A state file that does not parse raises StackError naming the file, not a traceback."""
    path = tmp_path / "stack.json"
    with pytest.raises(StackError, match=str(path)):
        parse_state(text, path)


def test_state_of_another_format_is_refused(tmp_path: Path) -> None:
    """A state file written by an incompatible version is refused with its format number."""
    with pytest.raises(StackError, match="format 99"):
        parse_state('{"format": 99}', tmp_path / "stack.json")


def test_endpoints_are_loopback_and_env_lines_are_evalable() -> None:
    """Endpoints come from the recorded ports and print as ``export KEY=value`` lines."""
    state = _state()
    assert state.kafka is not None
    assert state.redis is not None
    endpoints = Endpoints(kafka_bootstrap(state.kafka), redis_url(state.redis))
    assert endpoints.env_lines() == [
        "export AGENTLEDGER_KAFKA_BOOTSTRAP=127.0.0.1:41001",
        "export AGENTLEDGER_REDIS_URL=redis://127.0.0.1:41003/0",
    ]


def test_evaluated_env_lines_reach_a_child_process() -> None:
    """After ``eval "$(agentledger stack env)"`` in bash, a child process sees both variables."""
    endpoints = Endpoints("127.0.0.1:41001", "redis://127.0.0.1:41003/0")
    script = 'eval "$LINES"; env'
    env = {"PATH": os.environ.get("PATH", ""), "LINES": "\n".join(endpoints.env_lines())}
    child = subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, check=True
    )
    seen = dict(line.split("=", 1) for line in child.stdout.splitlines() if "=" in line)
    assert seen["AGENTLEDGER_KAFKA_BOOTSTRAP"] == "127.0.0.1:41001"
    assert seen["AGENTLEDGER_REDIS_URL"] == "redis://127.0.0.1:41003/0"


def test_status_lines_say_what_runs_where_and_since_when(tmp_path: Path) -> None:
    """A running component's line has its endpoint, pid and start time; a stopped one has none."""
    running = ComponentStatus("kafka", Health.RUNNING, "127.0.0.1:1", 10, STARTED, "4.1.1")
    stopped = ComponentStatus("redis", Health.STOPPED, None, None, None, "7.0.15")
    status = StackStatus(tmp_path, running, stopped)
    assert not status.running
    kafka_line, redis_line = status.lines()[1:]
    assert "running" in kafka_line
    assert "127.0.0.1:1" in kafka_line
    assert "pid 10" in kafka_line
    assert "since 2026-01-02T03:04:05+00:00" in kafka_line
    assert "stopped" in redis_line
    assert "pid" not in redis_line
