"""SaverSettings: how the LangGraph saver names runs, holds leases and waits (env AGENTLEDGER_*)."""

from __future__ import annotations

from pydantic import Field

from agentledger._core.settings import WorkerSettings


class SaverSettings(WorkerSettings):
    """Worker settings (endpoints, worker id, lease ttl, kill point …) plus the saver's own.

    Build it once at the edge of the program (``SaverSettings()`` reads the environment) and
    hand it to :meth:`AgentLedgerSaver.from_settings`.
    """

    thread_run_prefix: str = Field(
        default="lg.",
        max_length=64,
        description="run id of a LangGraph thread = this prefix + thread_id (keeps them apart "
        "from SDK runs)",
    )
    resume_barrier_s: float = Field(
        default=0.0,
        ge=0,
        le=600,
        description="how long opening a thread may wait for the projector to catch up before "
        "it reads the thread's events the projector has not applied yet from Kafka",
    )
    idle_release_ms: int = Field(
        default=5_000,
        ge=10,
        description="a thread not written for this long is paused and its lease released, so "
        "another process can continue it",
    )
    checkpoint_wait_ms: int = Field(
        default=30_000,
        ge=100,
        description="how long writes and effects wait for the checkpoint they belong to, which "
        "LangGraph may still be saving (durability='async')",
    )
