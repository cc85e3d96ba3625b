"""The CLI dispatcher: subcommands registered, expected errors as one line with exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentledger.cli import build_parser, describe_validation_error, run
from agentledger.settings import CommonSettings


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentledger.cli", *args],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_stack_and_topics_commands_are_registered() -> None:
    """`stack up|down|status|env|restart-kafka` and `topics ensure` parse to a handler."""
    parser = build_parser()
    for argv in (
        ["stack", "up"],
        ["stack", "down"],
        ["stack", "status", "--json"],
        ["stack", "env"],
        ["stack", "restart-kafka"],
        ["topics", "ensure", "--json"],
    ):
        assert callable(parser.parse_args(argv).run), argv


def test_a_validation_error_names_the_environment_variable() -> None:
    """An out-of-range setting is described with its AGENTLEDGER_ variable and value."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - the ValidationError is inspected below
        CommonSettings(run_partitions=0)
    text = describe_validation_error(info.value)  # type: ignore[arg-type]
    assert text.startswith("invalid settings: AGENTLEDGER_RUN_PARTITIONS=0")


def test_invalid_settings_exit_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    """A bad AGENTLEDGER_KAFKA_BOOTSTRAP gives exit code 2 and a one-line error naming it."""
    result = _cli(
        "topics", "ensure", env={"AGENTLEDGER_KAFKA_BOOTSTRAP": "nope", "HOME": str(tmp_path)}
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("agentledger: error: invalid settings: AGENTLEDGER_KAFKA_BOOTSTRAP")
    assert "Traceback" not in result.stderr


def test_status_of_a_stack_never_started_is_stopped_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`stack status` on an empty state dir says both are stopped and exits 1."""
    code = run(["--log-level", "ERROR", "stack", "status", "--state-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1
    assert "kafka  stopped" in out
    assert "redis  stopped" in out


def test_a_corrupt_state_file_is_an_expected_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A garbled state file exits 2 with an error naming the file, not a traceback."""
    (tmp_path / "stack.json").write_text("{garbled")
    code = run(["--log-level", "ERROR", "stack", "status", "--state-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert str(tmp_path / "stack.json") in err
