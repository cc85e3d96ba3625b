"""FleetSettings: the one settings class of ``agentledger worker`` and ``agentledger runs``."""

from __future__ import annotations

from pydantic import Field

from agentledger._core.settings import WorkerSettings


class FleetSettings(WorkerSettings):
    """How a fleet worker consumes requests and keeps runs going (env ``AGENTLEDGER_FLEET_*``)."""

    # A run held elsewhere is left to its holder (the request is requeued), not waited for.
    lease_wait_s: float = Field(default=0.0, ge=0, le=3600)
    fleet_concurrency: int = Field(
        default=16, ge=1, le=4096, description="runs one worker process executes at once"
    )
    fleet_group: str | None = Field(
        default=None,
        description="consumer group on runs.requests (unset = <topic_prefix>fleet.<agent name>)",
    )
    fleet_session_timeout_ms: int = Field(
        default=10_000,
        ge=1_000,
        description="a silent worker leaves the group after this; its unsettled requests move on",
    )
    fleet_heartbeat_ms: int = Field(default=3_000, ge=100)
    fleet_commit_interval_ms: int = Field(
        default=200, ge=10, description="how often settled request offsets are committed"
    )
    fleet_stable_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description=(
            "how long a resume waits for open transactions on the run's partitions to end "
            "(a dead writer's: its transaction timeout plus the broker's abort interval)"
        ),
    )
    fleet_run_retries: int = Field(
        default=3, ge=0, le=100, description="local retries of a run after a transient failure"
    )
    fleet_retry_backoff_ms: int = Field(default=500, ge=1)
    fleet_metrics_port: int | None = Field(
        default=None, ge=0, le=65535, description="serve /metrics here (unset = no server)"
    )
    fleet_metrics_host: str = Field(default="127.0.0.1", description="/metrics address")
    fleet_drain_s: float = Field(
        default=10.0, ge=0, description="on SIGTERM, how long in-flight runs may still finish"
    )
    approval_ttl_s: float = Field(
        default=3600.0, gt=0, description="expiry of an approval given without --expires-in"
    )
    approval_lease_wait_s: float = Field(
        default=30.0,
        ge=0,
        description="how long approve/reject/fork wait for a run's lease held by someone else",
    )
