"""Settings of the projector service (env prefix AGENTLEDGER_, e.g. AGENTLEDGER_PROJECTOR_GROUP)."""

from __future__ import annotations

from pydantic import Field

from agentledger.settings import CommonSettings

DAY_MS = 24 * 3600 * 1000


class ProjectorSettings(CommonSettings):
    """How the projector consumes, batches, alerts, keeps finished runs and serves metrics."""

    projector_group: str = Field(
        default="agentledger-projector",
        description="faust app id = Kafka consumer group of every projector instance",
    )
    projector_batch_max: int = Field(default=2000, ge=1, le=100_000)
    projector_linger_ms: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="how long a batch waits for more records after its first (throughput/latency)",
    )
    projector_tick_ms: int = Field(
        default=250,
        ge=10,
        description="how often quiet partitions are caught up to the log end, lag refreshed",
    )
    projector_gap_alert_ms: int = Field(
        default=30_000, ge=0, description="alert when a run's events wait this long for a gap"
    )
    projector_cache_runs: int = Field(
        default=20_000, ge=0, description="views kept in memory between batches"
    )
    projector_chunk: int = Field(
        default=5_000, ge=1, description="records per fold when reading ranges (catch-up, rebuild)"
    )
    projector_session_timeout_ms: int = Field(
        default=10_000,
        ge=6_000,
        description="after this long without heartbeats a dead instance's partitions move on",
    )
    projector_wedged_after_ms: int = Field(
        default=30_000,
        ge=1000,
        description="/health fails when a partition is behind the log end without moving this long",
    )
    projector_web_host: str = Field(default="127.0.0.1")
    projector_web_port: int = Field(default=6066, ge=0, le=65535)
    projector_web_enabled: bool = Field(default=True)
    view_retention_ms: int = Field(
        default=7 * DAY_MS,
        ge=-1,
        description="how long a finished run's view outlives its end; -1 keeps views forever",
    )
    rebuild_swap_grace_ms: int = Field(
        default=2_000,
        ge=0,
        description="after a rebuild swaps namespaces, wait this long before deleting the old one",
    )

    @property
    def retention(self) -> int | None:
        """``view_retention_ms`` as the stores take it (None = forever)."""
        return None if self.view_retention_ms < 0 else self.view_retention_ms
