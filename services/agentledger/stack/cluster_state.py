"""The cluster stack's state file: every process it started (role, ports, pid) and client env."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from agentledger.stack.cluster_config import ClusterPaths, Credentials
from agentledger.stack.procs import is_ours
from agentledger.stack.state import StateFile, validated_state
from agentledger.stack.statefile import write_state


class ClusterProcess(BaseModel):
    """One process of the cluster stack: enough to find it again and prove it is still ours."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str  # unique in the stack: "kafka-1", "redis-7001" …
    role: str  # what it does: "kafka broker+controller", "redis primary" …
    port: int  # the port clients use
    ports: dict[str, int] = Field(default_factory=dict)  # every listener, by name
    markers: tuple[str, ...]  # what its /proc/<pid>/cmdline contains (see procs.is_ours)
    pid: int | None = None
    proc_start: int | None = None  # start time in clock ticks (a reused pid has another)
    started_at: datetime | None = None
    version: str = ""

    def is_running(self) -> bool:
        """Whether the recorded process still runs and is still ours (same start, our argv)."""
        return (
            self.pid is not None
            and self.proc_start is not None
            and is_ours(self.pid, self.proc_start, self.markers)
        )

    def stopped(self) -> ClusterProcess:
        """This record once its process is gone (ports and markers kept for a restart)."""
        return self.model_copy(update={"pid": None, "proc_start": None, "started_at": None})


class ClusterState(StateFile):
    """Everything cluster.json holds."""

    secured: bool = False  # SASL_SSL listeners (False only before stack.certs existed)
    kafka_cluster_id: str | None = None
    kafka: tuple[ClusterProcess, ...] = ()
    # Filled by the Redis part (stack.cluster_redis): its processes and what clients set.
    redis: tuple[ClusterProcess, ...] = ()
    redis_env: dict[str, str] = Field(default_factory=dict)

    @property
    def processes(self) -> tuple[ClusterProcess, ...]:
        """Every process, Kafka first."""
        return (*self.kafka, *self.redis)


def load_cluster_state(paths: ClusterPaths) -> ClusterState:
    """cluster.json, or an empty state when there is none; a corrupt one names the fix."""
    try:
        text = paths.state_file.read_text()
    except FileNotFoundError:
        return ClusterState()
    return validated_state(
        ClusterState, text, paths.state_file, stop="its java and redis-server", delete=paths.root
    )


def save_cluster_state(paths: ClusterPaths, state: ClusterState) -> ClusterState:
    """Write cluster.json atomically; returns the state written."""
    paths.root.mkdir(parents=True, exist_ok=True)
    write_state(paths.state_file, state)
    return state


def load_or_create_credentials(paths: ClusterPaths) -> Credentials:
    """The cluster's passwords: generated once, kept in secrets.json readable by us only."""
    try:
        raw = json.loads(paths.secrets_file.read_text())
        return Credentials(raw["client_password"], raw["broker_password"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError):
        pass
    creds = Credentials(client_password=os.urandom(18).hex(), broker_password=os.urandom(18).hex())
    paths.root.mkdir(parents=True, exist_ok=True)
    fd = os.open(paths.secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(
            {"client_password": creds.client_password, "broker_password": creds.broker_password},
            handle,
        )
    return creds


def export_lines(env: Mapping[str, str]) -> list[str]:
    """``export KEY=value`` lines (quoted for the shell), in the given order."""
    return [f"export {key}={shlex.quote(value)}" for key, value in env.items()]


def bootstrap_of(processes: tuple[ClusterProcess, ...]) -> str:
    """The bootstrap list of every broker's client port."""
    return ",".join(f"127.0.0.1:{p.port}" for p in processes)
