"""AGENTLEDGER_KAFKA_COMPRESSION: the producers' codec, refused at start when unusable."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentledger.cli import run
from agentledger.kafkaclient import compression_of
from agentledger.settings import CommonSettings


def test_batches_are_zstd_unless_told_otherwise() -> None:
    """The default codec is zstd (cramjam is a dependency); gzip stays a choice, ``none`` turns
    compression off, and an empty value is the default."""
    assert compression_of(CommonSettings()) == "zstd"
    assert compression_of(CommonSettings(kafka_compression="")) == "zstd"
    assert compression_of(CommonSettings(kafka_compression="none")) is None
    assert compression_of(CommonSettings(kafka_compression=" GZIP ")) == "gzip"


def test_an_unknown_codec_stops_the_command_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A codec that is not one of the choices fails before anything runs, naming the
    variable and the choices."""
    monkeypatch.setenv("AGENTLEDGER_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("AGENTLEDGER_KAFKA_COMPRESSION", "brotli")
    assert run(["stack", "status"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "AGENTLEDGER_KAFKA_COMPRESSION='brotli'" in lines[0]
    assert "none, gzip, zstd, lz4" in lines[0]


def test_zstd_without_its_package_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """zstd and lz4 need cramjam: without it the settings name the variable and the package."""
    real = importlib.util.find_spec

    def without_cramjam(name: str, *args: object) -> object:
        return None if name == "cramjam" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", without_cramjam)
    for codec in ("zstd", "lz4"):
        with pytest.raises(ValidationError, match=r"AGENTLEDGER_KAFKA_COMPRESSION=.*cramjam"):
            CommonSettings(kafka_compression=codec)
    assert CommonSettings(kafka_compression="gzip").kafka_compression == "gzip"
