"""Small CLI findings: a zero approval validity is refused; --help lists no hidden command."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentledger.cli import build_parser, run


@pytest.mark.parametrize("expiry", ["0s", "0", "0ms"])
def test_an_approval_valid_for_no_time_is_refused(
    expiry: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`runs approve --expires-in 0s` fails in one line before connecting to anything."""
    monkeypatch.setenv("AGENTLEDGER_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("AGENTLEDGER_KAFKA_BOOTSTRAP", "127.0.0.1:1")  # never reached
    monkeypatch.setenv("AGENTLEDGER_REDIS_URL", "redis://127.0.0.1:1/0")
    assert run(["runs", "approve", "r1", "--expires-in", expiry]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"--expires-in {expiry}" in err


def test_help_lists_commands_without_suppress_markers() -> None:
    """`agentledger --help` never shows ``==SUPPRESS==`` nor the internal demo-worker command."""
    text = build_parser().format_help()
    assert "SUPPRESS" not in text
    assert "demo-worker" not in text
    assert "soak" in text
