"""The stack's state file (pids, ports, start times, versions) and the status model, both pure."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from agentledger.errors import StackError

STATE_FORMAT = 1


class StateFile(BaseModel):
    """What every state file of ours holds first: the format it is written in."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: int = STATE_FORMAT


class ProcessRecord(BaseModel):
    """One process we started: enough to find it again and to prove it is still ours."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pid: int | None = None
    # Start time in clock ticks since boot (/proc/<pid>/stat field 22): a reused pid has another.
    proc_start: int | None = None
    port: int
    started_at: datetime | None = None
    version: str = ""

    @property
    def has_process(self) -> bool:
        """Whether the record names a process (it may have died since)."""
        return self.pid is not None and self.proc_start is not None


class KafkaRecord(ProcessRecord):
    """The broker's record; ports and cluster id outlive the process so a restart reuses them."""

    controller_port: int
    cluster_id: str


class RedisRecord(ProcessRecord):
    """Redis's record."""


class StackState(StateFile):
    """Everything the state file holds."""

    kafka: KafkaRecord | None = None
    redis: RedisRecord | None = None
    # Components started by a LocalStack context: stopped when its last holder leaves.
    held: tuple[str, ...] = ()


def parse_state(text: str, source: Path) -> StackState:
    """Parse a state file; a corrupt one is a StackError naming the file and the fix."""
    return validated_state(
        StackState, text, source, stop="any agentledger java/redis-server", delete=source
    )


_State = TypeVar("_State", bound=StateFile)


def validated_state(
    model: type[_State], text: str, source: Path, *, stop: str, delete: Path
) -> _State:
    """A state file's text as ``model`` (in this version's format); a corrupt one is a
    StackError naming the file and the fix: stop the ``stop`` processes by hand, delete
    ``delete``."""
    try:
        state = model.model_validate(json.loads(text))
    except (json.JSONDecodeError, ValidationError) as e:
        msg = (
            f"state file {source} is corrupt ({type(e).__name__}); stop {stop} "
            f"processes by hand and delete {delete}"
        )
        raise StackError(msg) from e
    if state.format != STATE_FORMAT:
        msg = f"state file {source} has format {state.format}, this version writes {STATE_FORMAT}"
        raise StackError(msg)
    return state


def render_state(state: BaseModel) -> str:
    """A state file's JSON text."""
    return state.model_dump_json(indent=2) + "\n"


@dataclass(frozen=True)
class Endpoints:
    """Where Kafka and Redis answer."""

    kafka_bootstrap: str
    redis_url: str

    def env_lines(self) -> list[str]:
        """``export KEY=value`` lines: ``eval "$(agentledger stack env)"`` reaches child processes.

        Without ``export`` the shell would set the variables for itself only.
        """
        return [
            f"export AGENTLEDGER_KAFKA_BOOTSTRAP={shlex.quote(self.kafka_bootstrap)}",
            f"export AGENTLEDGER_REDIS_URL={shlex.quote(self.redis_url)}",
        ]


def kafka_bootstrap(record: KafkaRecord) -> str:
    """The bootstrap address of our broker."""
    return f"127.0.0.1:{record.port}"


def redis_url(record: ProcessRecord) -> str:
    """The URL of our Redis (database 0)."""
    return f"redis://127.0.0.1:{record.port}/0"


class Health(StrEnum):
    """What a component of the stack is doing right now."""

    RUNNING = "running"  # our process is alive and answers
    UNHEALTHY = "unhealthy"  # our process is alive but does not answer
    STOPPED = "stopped"  # no process recorded
    DEAD = "dead"  # a process was recorded but it is gone (or the pid is someone else's now)


@dataclass(frozen=True)
class ComponentStatus:
    """The truth about one component: state, pid, endpoint, since when, which version."""

    name: str
    health: Health
    endpoint: str | None
    pid: int | None
    started_at: datetime | None
    version: str

    def line(self) -> str:
        """One human-readable line."""
        parts = [f"{self.name:<6} {self.health.value:<9}"]
        if self.endpoint is not None:
            parts.append(self.endpoint)
        if self.pid is not None:
            parts.append(f"pid {self.pid}")
        if self.started_at is not None and self.health is not Health.STOPPED:
            parts.append(f"since {self.started_at.isoformat(timespec='seconds')}")
        if self.version:
            parts.append(f"v{self.version}")
        return "  ".join(parts)


@dataclass(frozen=True)
class StackStatus:
    """The status of the whole stack under one state directory."""

    state_dir: Path
    kafka: ComponentStatus
    redis: ComponentStatus

    @property
    def running(self) -> bool:
        """Both components run and answer."""
        return self.kafka.health is Health.RUNNING and self.redis.health is Health.RUNNING

    def lines(self) -> list[str]:
        """Human-readable status, one line per component."""
        return [f"state  {self.state_dir}", self.kafka.line(), self.redis.line()]


@dataclass(frozen=True)
class UpReport:
    """What ``up`` did: where each component answers, which it started, which it found running."""

    kafka_bootstrap: str | None
    redis_url: str | None
    started: tuple[str, ...]
    reused: tuple[str, ...]

    @property
    def endpoints(self) -> Endpoints:
        """Both endpoints (only when both components were brought up)."""
        if self.kafka_bootstrap is None or self.redis_url is None:
            msg = "only part of the local stack was brought up"
            raise StackError(msg)
        return Endpoints(self.kafka_bootstrap, self.redis_url)


@dataclass(frozen=True)
class DownReport:
    """What ``down`` did: processes stopped, and records that were already dead."""

    stopped: tuple[str, ...]
    already_gone: tuple[str, ...]
