"""Issue 17 finding 12: a typo'd AGENTLEDGER_* variable stops every service and every SDK
program at start (not only the CLI), while any variable of any service is accepted."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

import agentledger
from agentledger._core.settings import WorkerSettings
from agentledger.cli import build_parser
from agentledger.console.settings import ConsoleSettings
from agentledger.errors import ConfigurationError
from agentledger.fleet.settings import FleetSettings
from agentledger.projector.settings import ProjectorSettings
from agentledger.providers.sandbox.settings import SandboxSettings
from agentledger.reconciler.settings import ReconcilerSettings
from agentledger.settings import CommonSettings, declared_variables
from agentledger.variables import VARIABLES

SERVICES: list[type[BaseSettings]] = [
    CommonSettings,
    WorkerSettings,
    ProjectorSettings,
    ReconcilerSettings,
    FleetSettings,
    ConsoleSettings,
    SandboxSettings,
]


@pytest.mark.parametrize("cls", SERVICES, ids=lambda c: c.__name__)
def test_every_services_settings_refuse_a_typo(
    cls: type[BaseSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each service's settings, built from the environment, refuse AGENTLEDGER_REDIS_URI in one
    line that names it and the setting meant."""
    monkeypatch.setenv("AGENTLEDGER_REDIS_URI", "redis://127.0.0.1:1/0")
    with pytest.raises(ConfigurationError) as caught:
        cls()
    text = str(caught.value)
    assert "\n" not in text
    assert "AGENTLEDGER_REDIS_URI (did you mean AGENTLEDGER_REDIS_URL?)" in text


def test_sdk_connect_refuses_a_typo_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """agentledger.connect() with AGENTLEDGER_KAFKA_BOOTSTRAPP set fails at once, and no local
    stack is started in its state dir."""
    monkeypatch.setenv("AGENTLEDGER_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("AGENTLEDGER_KAFKA_BOOTSTRAPP", "127.0.0.1:9092")

    async def program() -> None:
        async with agentledger.connect():
            pytest.fail("connect must refuse the environment")

    with pytest.raises(ConfigurationError, match="AGENTLEDGER_KAFKA_BOOTSTRAPP"):
        asyncio.run(program())
    assert list(tmp_path.iterdir()) == []


def test_settings_built_from_arguments_do_not_read_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the environment source checks names: a typo there cannot break settings that are
    given every value explicitly and read no environment (the ArgumentsOnly test classes)."""
    from agentledger.settings import ArgumentsOnly  # noqa: PLC0415 - the mixin under test

    class Given(ArgumentsOnly, CommonSettings):
        """Settings from arguments only."""

    monkeypatch.setenv("AGENTLEDGER_REDIS_URI", "x")
    assert Given(key_prefix="k").key_prefix == "k"


def test_an_sdk_program_accepts_every_services_variables() -> None:
    """A program that imports only the SDK accepts the reconciler's, console's and projector's
    variables of a shared environment file (it knows them without importing those services)."""
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENTLEDGER_RECONCILER_ID": "rec-1",
        "AGENTLEDGER_WEBHOOK_URL": "http://127.0.0.1:1/hook",
        "AGENTLEDGER_CONSOLE_PORT": "8470",
        "AGENTLEDGER_PROJECTOR_GROUP": "g",
    }
    code = (
        "import sys; from agentledger._core.settings import WorkerSettings; WorkerSettings(); "
        "sys.exit(1 if 'agentledger.reconciler' in sys.modules else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_list_of_variables_matches_the_settings_classes() -> None:
    """VARIABLES names exactly what the settings classes read once every service is imported
    (a setting added or removed without updating it fails here)."""
    build_parser()  # imports every command's settings
    import agentledger.integrations.langgraph.settings  # noqa: F401, PLC0415 - its settings too

    declared = {n for n in declared_variables() if not n.startswith("AGENTLEDGER_TEST")}
    assert sorted(declared - VARIABLES) == [], "add these to agentledger.variables.VARIABLES"
    assert sorted(VARIABLES - declared) == [], "remove these from agentledger.variables.VARIABLES"
