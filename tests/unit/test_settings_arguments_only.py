"""ArgumentsOnly: a settings class built from its arguments, whatever the environment says."""

from __future__ import annotations

import pytest

from agentledger.settings import ArgumentsOnly, CommonSettings


class _Explicit(ArgumentsOnly, CommonSettings):
    """CommonSettings from arguments only."""


def test_arguments_only_settings_ignore_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """An AGENTLEDGER_* variable does not reach an ArgumentsOnly class; the argument and the
    field's default do (the plain class reads the variable)."""
    monkeypatch.setenv("AGENTLEDGER_TOPIC_PREFIX", "from-env.")
    assert CommonSettings().topic_prefix == "from-env."
    assert _Explicit(topic_prefix="given.").topic_prefix == "given."
    assert _Explicit().topic_prefix != "from-env."
