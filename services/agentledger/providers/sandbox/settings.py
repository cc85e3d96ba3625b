"""Settings of the sandbox provider process (env ``AGENTLEDGER_SANDBOX_*``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from agentledger.providers.faults import FaultRule
from agentledger.settings import DEFAULT_STATE_DIR, CommonSettings


class SandboxSettings(CommonSettings):
    """Where the sandbox listens, where it keeps its effects, and which faults it starts with."""

    sandbox_host: str = Field(default="127.0.0.1", description="interface to bind")
    sandbox_port: int = Field(default=8765, ge=0, le=65535, description="0 = any free port")
    sandbox_db: Path = Field(
        default=DEFAULT_STATE_DIR / "sandbox.sqlite3", description="SQLite file of the effects"
    )
    sandbox_faults: list[FaultRule] = Field(
        default_factory=list,
        description='fault rules armed at start, JSON: [{"mode": "down"}, {"latency_ms": 10}]',
    )
    sandbox_synchronous: Literal["NORMAL", "FULL"] = Field(
        default="FULL",
        description="SQLite fsync level of effect commits (FULL survives power loss too)",
    )

    @field_validator("sandbox_faults", mode="before")
    @classmethod
    def _faults_from_json(cls, value: object) -> object:
        """Accept JSON text (the --faults flag) and a single rule as well as a list of rules."""
        if isinstance(value, str | bytes):
            try:
                value = json.loads(value)
            except ValueError as e:
                msg = f"AGENTLEDGER_SANDBOX_FAULTS is not JSON: {e}"
                raise ValueError(msg) from e
        return [value] if isinstance(value, dict) else value

    @field_validator("sandbox_host")
    @classmethod
    def _host_given(cls, value: str) -> str:
        host = value.strip()
        if not host or any(ch.isspace() for ch in host):
            msg = f"AGENTLEDGER_SANDBOX_HOST={value!r}: give an address such as 127.0.0.1"
            raise ValueError(msg)
        return host

    @field_validator("sandbox_db")
    @classmethod
    def _db_is_file(cls, value: Path) -> Path:
        if value.exists() and value.is_dir():
            msg = f"AGENTLEDGER_SANDBOX_DB={value}: is a directory; give a file path"
            raise ValueError(msg)
        return value
