"""WorkerSettings: the one settings class of a worker process, built in the CLI and passed down."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

from pydantic import Field, model_validator

from agentledger._core.killswitch import ANY, KILL_POINTS
from agentledger._core.writer import Checkpoints
from agentledger.providers.settings import ProviderSettings
from agentledger.redisclient import DEFAULT_MAX_CONNECTIONS, DEFAULT_POOL_WAIT_S


def default_worker_id() -> str:
    """``host-pid-random``: unique per process, readable in alerts."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class WorkerSettings(ProviderSettings):
    """Where the worker writes, how it holds leases and resumes (env ``AGENTLEDGER_*``)."""

    worker_id: str = Field(default_factory=default_worker_id, min_length=1, max_length=200)
    transactional_id: str | None = Field(
        default=None,
        description=(
            "Kafka transactional id of this worker's producer; keep it stable across restarts "
            "so a restarted worker aborts what its killed predecessor left open "
            "(unset = agentledger-worker-<worker_id>)"
        ),
    )
    use_views: bool = Field(
        default=True,
        description="resume from the projector's Redis views when caught up (else fold Kafka)",
    )
    lease_ttl_ms: int = Field(
        default=15_000, ge=100, description="a dead worker's runs can be taken over after this"
    )
    lease_wait_s: float = Field(
        default=30.0,
        ge=0,
        le=3600,
        description="how long opening a run waits for another holder's lease on it to be "
        "released or to expire (a crashed worker's lasts lease_ttl_ms); 0: fail at once",
    )
    resume_barrier_s: float = Field(
        default=0.0,
        ge=0,
        le=600,
        description="how long opening a run may wait for the projector to catch up before it "
        "reads the run's events the projector has not applied yet from Kafka (0: never wait; "
        "that read is short when the projector is just behind)",
    )
    redis_max_connections: int = Field(
        default=DEFAULT_MAX_CONNECTIONS,
        ge=1,
        description=(
            "size of the process's one Redis connection pool (leases and views share it); "
            "a call finding every connection busy waits for one instead of failing"
        ),
    )
    redis_pool_wait_s: float = Field(
        default=DEFAULT_POOL_WAIT_S,
        gt=0,
        le=3600,
        description=(
            "how long a Redis call waits for a free pooled connection before it fails with "
            "UnreachableError (raise redis_max_connections if this happens under load)"
        ),
    )
    blob_dir: Path | None = Field(
        default=None, description="store large payloads as files here (unset = always inline)"
    )
    blob_threshold_bytes: int = Field(default=64 * 1024, ge=1)
    checkpoints: Checkpoints = Field(
        default="each_step",
        description=(
            "each_step: a step returns once its checkpoint is committed (two commits per "
            "effect step); with_next_commit: the checkpoint commits with the run's next durable "
            "write (the next intent, a durable activity, a pause, the finish): one commit per "
            "effect step, and a crash re-runs the last step's body (effects are never repeated)"
        ),
    )
    run_index: bool = Field(
        default=True,
        description=(
            "open new runs from the Redis run index without reading the log (the log is read "
            "when the index was wiped, until a worker finds the run topics empty)"
        ),
    )
    kill_point: str | None = Field(
        default=None, description="chaos only: SIGKILL this process at this SDK kill point"
    )
    kill_hit: int = Field(default=1, ge=1, description="chaos only: at the n-th time it is reached")

    @property
    def producer_id(self) -> str:
        """The transactional id to use."""
        return self.transactional_id or f"agentledger-worker-{self.worker_id}"

    @model_validator(mode="after")
    def _known_kill_point(self) -> WorkerSettings:
        if self.kill_point is not None and self.kill_point not in (*KILL_POINTS, ANY):
            msg = (
                f"AGENTLEDGER_KILL_POINT={self.kill_point!r}: use one of "
                f"{', '.join((*KILL_POINTS, ANY))}"
            )
            raise ValueError(msg)
        return self
