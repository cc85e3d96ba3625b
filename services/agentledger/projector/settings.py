"""Settings of the projector service (env prefix AGENTLEDGER_, e.g. AGENTLEDGER_PROJECTOR_GROUP)."""

from __future__ import annotations

import zlib
from typing import Any

from pydantic import Field, model_validator

from agentledger.projector.killpoints import kill_point_problem
from agentledger.settings import DEFAULT_TOPIC_PREFIX, CommonSettings

DAY_MS = 24 * 3600 * 1000
DEFAULT_WEB_PORT = 6066
#: Web ports of deployments with their own topic prefix: 6100-6999, picked by the prefix.
_PREFIXED_PORTS = (6100, 900)


def group_for(topic_prefix: str) -> str:
    """The projector's consumer group of a deployment: ``agentledger-projector`` by default."""
    return f"{topic_prefix.rstrip('.') or DEFAULT_TOPIC_PREFIX.rstrip('.')}-projector"


def web_port_for(topic_prefix: str) -> int:
    """The projector's web port of a deployment: 6066 by default, 6100-6999 for other prefixes."""
    if topic_prefix == DEFAULT_TOPIC_PREFIX:
        return DEFAULT_WEB_PORT
    first, count = _PREFIXED_PORTS
    return first + zlib.crc32(topic_prefix.encode()) % count


class ProjectorSettings(CommonSettings):
    """How the projector consumes, batches, alerts, keeps finished runs and serves metrics."""

    projector_group: str = Field(
        default=group_for(DEFAULT_TOPIC_PREFIX),
        description=(
            "faust app id = Kafka consumer group of every projector instance; unset = "
            "<topic prefix>-projector (agentledger-projector by default)"
        ),
    )
    projector_batch_max: int = Field(default=2000, ge=1, le=100_000)
    projector_linger_ms: int = Field(
        default=20,
        ge=0,
        le=1000,
        description=(
            "how long a batch below the cap waits for more records while the projector is "
            "behind (its last batch reached the cap or left records queued); a projector that "
            "keeps up folds what has arrived at once"
        ),
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
    projector_parked_max: int = Field(
        default=1000,
        ge=1,
        le=1_000_000,
        description=(
            "events parked per run ahead of a gap; past it the highest seqs are dropped and the "
            "run's log is re-read once the gap before them has filled"
        ),
    )
    projector_hold_ms: int = Field(
        default=1000,
        ge=0,
        le=10_000,
        description=(
            "how long events waiting for a gap are held in memory (progress stops before them) "
            "before they are parked in Redis (up to 30 s while a co-partition is behind the log "
            "end); 0 = park at once"
        ),
    )
    projector_chunk: int = Field(
        default=5_000, ge=1, description="records per fold when reading ranges (catch-up)"
    )
    rebuild_chunk: int = Field(
        default=50_000,
        ge=1,
        description=(
            "records per fold of a rebuild (views rebuild/verify): a run's events on the three "
            "run topics meet in fewer chunks, so fewer wait for a gap and are folded again"
        ),
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
    projector_web_port: int = Field(
        default=DEFAULT_WEB_PORT,
        ge=1,
        le=65535,
        description="unset = 6066 for the default topic prefix, else 6100-6999 from the prefix",
    )
    projector_web_enabled: bool = Field(default=True)
    view_retention_ms: int = Field(
        default=7 * DAY_MS,
        ge=-1,
        description="how long a finished run's view outlives its end; -1 keeps views forever",
    )
    rebuild_workers: int = Field(
        default=0,
        ge=0,
        le=1024,
        description=(
            "processes a rebuild (views rebuild/verify) folds the partitions in; 0 = one per CPU "
            "core (a log under 30,000 records folds in the command's own process), 1 = in the "
            "command's own process; never more than the run topics' partitions"
        ),
    )
    rebuild_swap_grace_ms: int = Field(
        default=2_000,
        ge=0,
        description="after a rebuild swaps namespaces, wait this long before deleting the old one",
    )

    projector_kill_point: str | None = Field(
        default=None,
        description=(
            "chaos only: SIGKILL the projector at this kill point (slice_committed, "
            "batch_committed; DESIGN.md §16)"
        ),
    )
    projector_kill_hit: int = Field(
        default=1, ge=1, description="chaos only: at the n-th time the projector reaches it"
    )

    @model_validator(mode="after")
    def _known_kill_point(self) -> ProjectorSettings:
        problem = kill_point_problem(self.projector_kill_point, self.projector_kill_hit)
        if problem is not None:
            raise ValueError(problem)
        return self

    @model_validator(mode="before")
    @classmethod
    def _follow_the_topic_prefix(cls, values: Any) -> Any:
        """Unset group and web port follow the topic prefix, so two deployments never share."""
        if not isinstance(values, dict):
            return values
        prefix = str(values.get("topic_prefix") or DEFAULT_TOPIC_PREFIX)
        values = dict(values)
        values.setdefault("projector_group", group_for(prefix))
        values.setdefault("projector_web_port", web_port_for(prefix))
        return values

    @property
    def retention(self) -> int | None:
        """``view_retention_ms`` as the stores take it (None = forever)."""
        return None if self.view_retention_ms < 0 else self.view_retention_ms
