"""Console settings for tests: built from arguments only, on another test's endpoints and keys."""

from __future__ import annotations

from typing import Any

from agentledger.reconciler import ReconcilerSettings
from agentledger.settings import ArgumentsOnly, CommonSettings

from .settings import ConsoleSettings


class _InitOnlyConsoleSettings(ArgumentsOnly, ConsoleSettings):
    """Built from the constructor's arguments only."""


class _InitOnlyReconcilerSettings(ArgumentsOnly, ReconcilerSettings):
    """Built from the constructor's arguments only."""


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
