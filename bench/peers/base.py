"""The port every measured system implements: run the workload, report bytes, resume a run."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

# Called before each step with the number of steps already done (0 before the first step).
Probe = Callable[[int], Awaitable[None]]
Kind = Literal["ours", "peer", "floor"]


@dataclass(frozen=True)
class MarkedProbe:
    """A probe that acts only after the step counts ``at``: a peer may skip what it does only
    for a probe (agentledger's commit of a queued checkpoint) before the other steps."""

    at: frozenset[int]
    act: Probe

    async def __call__(self, done: int) -> None:
        """``act(done)`` at a mark, nothing elsewhere."""
        if done in self.at:
            await self.act(done)


def acts_at(probe: Probe, done: int) -> bool:
    """Whether ``probe`` does anything after ``done`` steps (any plain probe may)."""
    return not isinstance(probe, MarkedProbe) or done in probe.at


class PeerUnavailableError(RuntimeError):
    """The peer cannot be measured here (not installed, needs a server module …): the message
    is the reason shown in the report."""


@dataclass(frozen=True)
class Env:
    """Where the servers of this bench session are; JSON-serialisable for child processes."""

    work_dir: str
    pg_dsn: str | None = None
    pg_version: str = ""
    kafka_bootstrap: str | None = None
    redis_url: str | None = None
    fsync_redis_url: str | None = None
    state_dir: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Env:
        """The inverse of :meth:`to_json`."""
        return cls(**data)

    def pg_database_dsn(self, dbname: str) -> str:
        """The DSN of another database on the bench's PostgreSQL."""
        if self.pg_dsn is None:
            msg = "this bench session has no PostgreSQL (see the postgres row of the report)"
            raise PeerUnavailableError(msg)
        return self.pg_dsn.rsplit("/", 1)[0] + "/" + dbname


def safe_name(text: str) -> str:
    """``text`` reduced to [a-z0-9_] (database, file and key names)."""
    return re.sub(r"[^a-z0-9_]", "_", text.lower())


class Peer(ABC):
    """One system under test, in one namespace (its own database, file or topic prefix).

    ``fresh`` means: start from an empty store (the measuring process); a resuming process
    opens the existing one.
    """

    name: ClassVar[str]
    kind: ClassVar[Kind] = "peer"
    resumable: ClassVar[bool] = True
    #: Set by ``resume``: where the resumed state came from, for the report.
    resume_detail: str = ""

    def __init__(self, env: Env, namespace: str, *, fresh: bool = True) -> None:
        self.env = env
        self.namespace = namespace
        self.fresh = fresh
        #: Seconds each ``run`` took to open a new run before its first step (peers that have
        #: such a moment append to it; the report shows its p50 as a figure).
        self.open_s: list[float] = []

    @property
    def store_name(self) -> str:
        """A name for this peer's store in this namespace."""
        return safe_name(f"{self.name}_{self.namespace}")

    async def __aenter__(self) -> Self:
        """Connect (and create the store when fresh)."""
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Disconnect."""
        await self.stop()

    @abstractmethod
    async def start(self) -> None:
        """Connect; raise PeerUnavailableError with the reason when this peer cannot run here."""

    @abstractmethod
    async def stop(self) -> None:
        """Disconnect; idempotent."""

    @abstractmethod
    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """Run ``steps`` steps of the workload as a new run; the per-step latencies in seconds
        (from the step's start until its checkpoint is durable)."""

    @abstractmethod
    async def stored_bytes(self) -> int:
        """Bytes this namespace's store holds now."""

    async def resume(self, run_id: str, steps_done: int, probe: Probe) -> None:
        """In a fresh process: reopen ``run_id`` (which crashed after ``steps_done`` steps) and
        call ``probe(steps_done)`` once it is ready to run the next step."""
        msg = f"{self.name} has no run state to resume"
        raise PeerUnavailableError(msg)

    def notes(self) -> list[str]:
        """What durability this peer was measured with, in words for the report."""
        return []

    @classmethod
    @asynccontextmanager
    async def sidecar(cls, env: Env, namespace: str) -> AsyncIterator[None]:
        """Whatever must run beside the peer's processes while a namespace is measured (a
        projector …), and the namespace's fresh store; nothing by default."""
        yield
