"""Settings of the reconciler service (env ``AGENTLEDGER_RECONCILER_*``, ``..._WEBHOOK_*``)."""

from __future__ import annotations

import os
import socket
from typing import Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentledger.alerts.retry import Backoff
from agentledger.alerts.vendors import PAGERDUTY_EVENTS_URL
from agentledger.providers.settings import ProviderSettings

#: Redis calls one batch (or the watch scan) may have in flight (redis-py pools default to 100).
MAX_REDIS_IN_FLIGHT = 64


def default_reconciler_id() -> str:
    """A name unique to this process on this host (set it to keep it across restarts)."""
    return f"reconciler-{socket.gethostname()}-{os.getpid()}"


class ProviderPolicy(BaseModel):
    """How to reach and how hard to press one provider when looking up or compensating."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str | None = Field(default=None, description="base URL; unset = AGENTLEDGER_PROVIDER_URL")
    concurrency: int = Field(default=16, ge=1, le=1024, description="calls in flight at once")
    timeout_s: float = Field(default=5.0, gt=0, le=600, description="one lookup, whole request")
    attempts: int = Field(default=3, ge=1, le=20, description="tries of one lookup in a pass")
    backoff_base_ms: int = Field(default=100, ge=1)
    backoff_max_ms: int = Field(default=30_000, ge=1)

    @property
    def backoff(self) -> Backoff:
        """The backoff between tries and between passes while the provider is unavailable."""
        return Backoff(self.backoff_base_ms, self.backoff_max_ms)

    def worst_case_ms(self) -> int:
        """The longest one lookup (all its tries and waits) can take."""
        return int(self.attempts * self.timeout_s * 1000) + self.backoff.total_ms(self.attempts - 1)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            msg = f"provider url {value!r} must start with http:// or https://"
            raise ValueError(msg)
        return value.rstrip("/") if value else None


class ReconcilerSettings(ProviderSettings):
    """Where to look, how often, how patiently, and where alerts go."""

    reconciler_id: str = Field(
        default_factory=default_reconciler_id,
        description="owner name on the leases it takes; unique per instance",
    )
    reconciler_poll_interval_s: float = Field(default=5.0, gt=0, le=3600)
    reconciler_watch_interval_s: float = Field(
        default=30.0,
        ge=0,
        description="how often every running/paused/failed run is scanned (orphans, pauses, "
        "overruns, compensations); open intents are checked every poll",
    )
    reconciler_intent_grace_ms: int = Field(
        default=5_000, ge=0, description="an intent younger than this is left to its writer"
    )
    reconciler_orphan_grace_ms: int = Field(
        default=30_000,
        ge=0,
        description="a running run idle this long without a lease is re-queued",
    )
    reconciler_lease_ttl_ms: int = Field(
        default=60_000, ge=100, description="ttl of the run lease held while resolving"
    )
    reconciler_run_concurrency: int = Field(
        default=1024,
        ge=1,
        le=16384,
        description="runs in flight (claimed, not yet released); batches are claimed ahead "
        "while their runs fit, so one batch's claim and write overlap another's lookups (the "
        "providers' own concurrency bounds the lookups)",
    )
    reconciler_batch_size: int = Field(
        default=128, ge=1, le=4096, description="runs claimed together behind one resume barrier"
    )
    reconciler_scan_limit: int = Field(default=10_000, ge=1)
    reconciler_barrier_timeout_s: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="wait this long for the projector to reach a batch's end offsets before "
        "reading the log's tail past its progress (0: read the tail at once)",
    )
    reconciler_auto_compensate: bool = Field(
        default=True,
        description="undo performed effects of rejected steps once their run has failed",
    )
    reconciler_providers: dict[str, ProviderPolicy] = Field(
        default_factory=dict, description='JSON: {"payments": {"url": "http://…"}}'
    )
    reconciler_default_provider: ProviderPolicy = Field(default_factory=ProviderPolicy)
    reconciler_alert_flush_ms: int = Field(
        default=30_000, ge=0, description="republish alert events unconfirmed for this long"
    )
    reconciler_metrics_port: int | None = Field(
        default=None, ge=0, le=65535, description="serve /metrics here (unset = no server)"
    )
    reconciler_metrics_host: str = Field(default="127.0.0.1", description="/metrics address")
    webhook_url: str | None = Field(default=None, description="POST every alert here (JSON)")
    webhook_attempts: int = Field(default=8, ge=1, le=100)
    webhook_timeout_s: float = Field(default=5.0, gt=0, le=600)
    webhook_backoff_base_ms: int = Field(default=200, ge=1)
    webhook_backoff_max_ms: int = Field(default=10_000, ge=1)
    alerts_log: bool = Field(default=True, description="log every alert event")
    pagerduty_routing_key: SecretStr | None = Field(
        default=None, description="send alerts to PagerDuty (Events API v2) with this key"
    )
    pagerduty_url: str = Field(
        default=PAGERDUTY_EVENTS_URL, description="PagerDuty's Events API v2 enqueue URL"
    )
    slack_webhook_url: SecretStr | None = Field(
        default=None, description="post alerts to this Slack incoming webhook"
    )

    @field_validator("webhook_url", "pagerduty_url")
    @classmethod
    def _webhook_http(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or value == "":
            return None
        if not value.startswith(("http://", "https://")):
            var = f"AGENTLEDGER_{(info.field_name or '').upper()}"
            msg = (
                f"{var}={value!r}: must start with http:// or https://, "
                "e.g. https://hooks.example.com/agentledger"
            )
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _lease_outlasts_lookups(self) -> Self:
        policies = {"default": self.reconciler_default_provider, **self.reconciler_providers}
        for name, policy in policies.items():
            worst = policy.worst_case_ms()
            if worst >= self.reconciler_lease_ttl_ms:
                msg = (
                    f"AGENTLEDGER_RECONCILER_LEASE_TTL_MS={self.reconciler_lease_ttl_ms} is "
                    f"shorter than the worst case of one lookup at provider {name!r} "
                    f"({policy.attempts} attempts x {policy.timeout_s}s + backoff = {worst} ms): "
                    "raise the ttl, or lower that provider's attempts or timeout_s"
                )
                raise ValueError(msg)
            if policy.backoff_base_ms > policy.backoff_max_ms:
                msg = (
                    f"provider {name!r}: backoff_base_ms ({policy.backoff_base_ms}) must not "
                    f"exceed backoff_max_ms ({policy.backoff_max_ms})"
                )
                raise ValueError(msg)
        if self.webhook_backoff_base_ms > self.webhook_backoff_max_ms:
            msg = (
                f"AGENTLEDGER_WEBHOOK_BACKOFF_BASE_MS={self.webhook_backoff_base_ms} must not "
                f"exceed AGENTLEDGER_WEBHOOK_BACKOFF_MAX_MS={self.webhook_backoff_max_ms}"
            )
            raise ValueError(msg)
        return self

    def policy(self, provider: str) -> ProviderPolicy:
        """The policy of ``provider`` (its own entry, else the default)."""
        return self.reconciler_providers.get(provider, self.reconciler_default_provider)

    @property
    def webhook_backoff(self) -> Backoff:
        """Backoff between webhook attempts."""
        return Backoff(self.webhook_backoff_base_ms, self.webhook_backoff_max_ms)
