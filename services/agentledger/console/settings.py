"""ConsoleSettings: where the console listens and the token that allows changes of state."""

from __future__ import annotations

from pydantic import Field, SecretStr

from agentledger.fleet import FleetSettings


class ConsoleSettings(FleetSettings):
    """The fleet's settings (to read runs and decide on them) plus the console's own."""

    console_host: str = Field(default="127.0.0.1", description="address the console binds")
    console_port: int = Field(default=8470, ge=0, le=65535, description="0 = any free port")
    console_token: SecretStr | None = Field(
        default=None,
        description="required for every change of state (approve, reject, settle, ack); "
        "unset = the console is read-only",
    )
    console_live_interval_s: float = Field(
        default=2.0, gt=0, le=600, description="how often live pages look for changes"
    )
    console_list_limit: int = Field(default=500, ge=1, description="runs per status listed")
