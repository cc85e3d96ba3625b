"""Settings of a provider client; services that call providers extend :class:`ProviderSettings`."""

from __future__ import annotations

from pydantic import Field, field_validator

from agentledger.settings import CommonSettings


class ProviderSettings(CommonSettings):
    """Where the effect provider is and how long to wait for it (env ``AGENTLEDGER_PROVIDER_*``)."""

    provider_url: str | None = Field(
        default=None,
        description="http(s)://host:port of an Idempotency-Key API; unset = a sandbox we start",
    )
    provider_timeout_s: float = Field(
        default=10.0, gt=0, le=600, description="whole request, connect to last byte"
    )
    provider_connect_timeout_s: float = Field(default=2.0, gt=0, le=600)

    @field_validator("provider_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")):
            msg = (
                f"AGENTLEDGER_PROVIDER_URL={value!r}: must start with http:// or https://, "
                "e.g. http://127.0.0.1:8765"
            )
            raise ValueError(msg)
        return value.rstrip("/")
