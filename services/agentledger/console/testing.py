"""Console settings for tests: built from arguments only, on another test's endpoints and keys."""

from __future__ import annotations

from typing import Any

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from agentledger.reconciler.settings import ReconcilerSettings
from agentledger.settings import CommonSettings

from .settings import ConsoleSettings


class _InitOnlyConsoleSettings(ConsoleSettings):
    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Use the constructor's arguments only."""
        return (init_settings,)


class _InitOnlyReconcilerSettings(ReconcilerSettings):
    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Use the constructor's arguments only."""
        return (init_settings,)


def _common(settings: CommonSettings) -> dict[str, Any]:
    return {k: v for k, v in settings.model_dump().items() if k in CommonSettings.model_fields}


def console_settings(base: CommonSettings, **overrides: Any) -> ConsoleSettings:
    """Console settings on ``base``'s endpoints, topics and keys (any free port), ``overrides``."""
    values = {**base.model_dump(), "console_port": 0, **overrides}
    known = {k: v for k, v in values.items() if k in ConsoleSettings.model_fields}
    return _InitOnlyConsoleSettings(**known)


def reconciler_settings(base: CommonSettings, **overrides: Any) -> ReconcilerSettings:
    """Reconciler settings (for the console's settle action) on ``base``'s endpoints and keys."""
    return _InitOnlyReconcilerSettings(**{**_common(base), **overrides})
