"""The environment source skips its per-field walk when no variable it reads is set, and every
service's settings come out as pydantic-settings' own environment source builds them."""

from __future__ import annotations

import os
from typing import Any

import pytest
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource
from pydantic_settings.sources import PydanticBaseEnvSettingsSource

from agentledger._core.settings import WorkerSettings
from tests.unit.test_settings_everywhere import SERVICES

ENVIRONMENTS: dict[str, dict[str, str]] = {
    "none": {},
    "endpoints": {
        "AGENTLEDGER_KAFKA_BOOTSTRAP": "127.0.0.1:9092",
        "AGENTLEDGER_REDIS_URL": "redis://127.0.0.1:6379/0",
    },
    "lower-case": {"agentledger_key_prefix": "lower", "agentledger_run_partitions": "8"},
    "other": {"AGENTLEDGER_LOG_LEVEL": "DEBUG", "AGENTLEDGER_OUTAGE_BUDGET_S": "3.5"},
}


def reference(cls: type[BaseSettings]) -> type[BaseSettings]:
    """``cls`` read through pydantic-settings' environment source as it is (every field)."""

    class Reference(cls):  # type: ignore[valid-type,misc]
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            return (init_settings, env_settings, file_secret_settings)

    return Reference


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=str)
@pytest.mark.parametrize("cls", SERVICES, ids=lambda c: c.__name__)
def test_settings_equal_the_full_walk(
    cls: type[BaseSettings], env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With or without variables of the class set, the fields equal the plain source's."""
    for name in list(os.environ):
        if name.upper().startswith("AGENTLEDGER_"):
            monkeypatch.delenv(name)
    for name, value in ENVIRONMENTS[env].items():
        monkeypatch.setenv(name, value)
    fixed: dict[str, Any] = {"worker_id": "w"} if issubclass(cls, WorkerSettings) else {}
    assert cls(**fixed).model_dump() == reference(cls)(**fixed).model_dump()


def test_no_variable_of_the_class_means_no_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a variable the class reads, the environment source never walks the fields."""
    for name in list(os.environ):
        if name.upper().startswith("AGENTLEDGER_"):
            monkeypatch.delenv(name)
    walked: list[str] = []
    plain = PydanticBaseEnvSettingsSource.__call__

    def counting(self: PydanticBaseEnvSettingsSource) -> dict[str, object]:
        walked.append(type(self).__name__)
        return plain(self)

    monkeypatch.setattr(PydanticBaseEnvSettingsSource, "__call__", counting)
    WorkerSettings(worker_id="w")
    assert walked == []
    monkeypatch.setenv("AGENTLEDGER_KEY_PREFIX", "set")
    assert WorkerSettings(worker_id="w").key_prefix == "set"
    assert walked == ["EnvSettingsSource"]
