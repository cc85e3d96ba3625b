"""Configuration mistakes fail at start in one line naming the setting; prefixes isolate."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agentledger.cli import run
from agentledger.projector.settings import ProjectorSettings


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The single line the CLI wrote on stderr."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("typo", "meant"),
    [
        ("AGENTLEDGER_KAFKA_BOOTSTRAPP", "AGENTLEDGER_KAFKA_BOOTSTRAP"),
        ("AGENTLEDGER_REDIS_URI", "AGENTLEDGER_REDIS_URL"),
    ],
)
def test_an_unknown_agentledger_variable_stops_the_command(
    typo: str,
    meant: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A typo'd AGENTLEDGER_* variable is refused before anything runs, naming the likely one."""
    monkeypatch.setenv("AGENTLEDGER_STATE_DIR", str(tmp_path))
    monkeypatch.setenv(typo, "127.0.0.1:1")
    assert run(["stack", "status"]) == 2
    line = one_error_line(capsys)
    assert typo in line
    assert f"did you mean {meant}?" in line


def test_known_variables_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Variables that some service reads (projector, console, tracing) are not refused."""
    monkeypatch.setenv("AGENTLEDGER_STATE_DIR", str(tmp_path))
    plain = run(["stack", "status"])  # 1: nothing runs in this state dir
    monkeypatch.setenv("AGENTLEDGER_PROJECTOR_GROUP", "g")
    monkeypatch.setenv("AGENTLEDGER_TRACES_FILE", str(tmp_path / "spans"))
    assert run(["stack", "status"]) == plain != 2
    assert "unknown setting" not in capsys.readouterr().err


def test_providers_that_are_not_json_fail_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AGENTLEDGER_RECONCILER_PROVIDERS=notjson is one line naming the variable, no traceback."""
    monkeypatch.setenv("AGENTLEDGER_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("AGENTLEDGER_RECONCILER_PROVIDERS", "notjson")
    assert run(["reconciler", "--once"]) == 2
    line = one_error_line(capsys)
    assert "AGENTLEDGER_RECONCILER_PROVIDERS is not valid JSON" in line


def test_web_port_zero_is_rejected_by_validation() -> None:
    """Port 0 would pass validation and then make faust fail: it is refused up front."""
    with pytest.raises(ValidationError, match="projector_web_port"):
        ProjectorSettings(projector_web_port=0)


def test_group_and_web_port_follow_the_topic_prefix() -> None:
    """Two deployments on one Kafka and host (two prefixes) never share a group or a port."""
    default = ProjectorSettings()
    staging = ProjectorSettings(topic_prefix="staging.")
    other = ProjectorSettings(topic_prefix="other.")
    assert (default.projector_group, default.projector_web_port) == ("agentledger-projector", 6066)
    assert staging.projector_group == "staging-projector"
    assert len({default.projector_web_port, staging.projector_web_port}) == 2
    assert staging.projector_group != other.projector_group
    pinned = ProjectorSettings(topic_prefix="x.", projector_group="g", projector_web_port=7000)
    assert (pinned.projector_group, pinned.projector_web_port) == ("g", 7000)
