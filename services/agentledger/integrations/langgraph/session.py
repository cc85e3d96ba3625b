"""The saver's hold on one thread: its lease, its writer (gapless seq under one fence), the
checkpoints it knows by id, and the last lists it stored (for deltas).

LangGraph saves a checkpoint in the background while the next superstep already runs, so the
writes of a task (and its effects) can arrive before the checkpoint they belong to: they wait
for it (:meth:`ThreadSession.step_of`). Flushes are serialized per thread, so events reach the
log in the order they were appended and a failed flush stops every later one.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, TypeVar

import structlog

from agentledger._core.writer import RunWriter
from agentledger.alerts.codes import AlertCode
from agentledger.errors import AgentLedgerError, GraphStateError
from agentledger.events.models import (
    Alert,
    CheckpointSaved,
    CheckpointsDeleted,
    RunEvent,
    RunPaused,
    Severity,
)
from agentledger.integrations.langgraph.reading import live_checkpoints
from agentledger.integrations.langgraph.writing import LastValues
from agentledger.leasing import LeaseKeeper
from agentledger.tasks import within
from agentledger.views.graph_model import GraphCheckpoint
from agentledger.views.model import RunView

E = TypeVar("E", bound=RunEvent)
_log = structlog.get_logger("agentledger.langgraph")
INTERRUPT = "__interrupt__"


class ThreadSession:
    """One thread held by this process; reads see everything appended, durable or not yet."""

    def __init__(
        self, thread_id: str, writer: RunWriter, keeper: LeaseKeeper, *, checkpoint_wait_s: float
    ) -> None:
        self.thread_id = thread_id
        self.writer = writer
        self.keeper = keeper
        self.last = LastValues()
        self.busy = 0
        self.last_used = time.monotonic()
        self.run_ids_indexed: set[str] = set()
        self._checkpoint_wait_s = checkpoint_wait_s
        self._flush_lock = asyncio.Lock()
        self._waiting: dict[str, asyncio.Event] = {}
        self._by_id: dict[str, int] = {}
        self._closed = False
        self.reindex()
        self.log = _log.bind(run_id=self.run_id, thread_id=thread_id)

    @property
    def run_id(self) -> str:
        """The run this thread is."""
        return self.writer.folded.run_id

    @property
    def view(self) -> RunView:
        """The run as this writer knows it (folded in place with every append)."""
        return self.writer.view

    @property
    def usable(self) -> bool:
        """False once closed, after a failed flush, or when the lease was lost."""
        return not self._closed and self.writer.broken is None and not self.keeper.lost.is_set()

    def touch(self) -> None:
        """Mark the thread as used now (the idle reaper releases threads left alone)."""
        self.last_used = time.monotonic()

    # --- appending ------------------------------------------------------------------------

    def append(self, cls: type[E], **fields: Any) -> E:
        """Queue one event of the run (it is folded into :attr:`view` at once)."""
        self.keeper.ensure_held()
        return self.writer.append(cls, **fields)

    def alert(
        self,
        code: AlertCode,
        summary: str,
        *,
        severity: Severity | None = None,
        key: str | None = None,
        **fields: Any,
    ) -> Alert:
        """Queue an Alert about the thread's run (it rides the next flush)."""
        return self.writer.alert(code, summary, severity=severity, key=key, **fields)

    def close_alert(
        self, code: AlertCode, reason: str, *, key: str | None = None, **fields: Any
    ) -> Alert:
        """Queue the closed event of the thread's run's alert ``code`` about ``key``."""
        return self.writer.close_alert(code, reason, key=key, **fields)

    def append_checkpoint(self, fields: dict[str, Any]) -> int:
        """Queue a CheckpointSaved as the next step; wake writes waiting for it."""
        step = self._next_step
        self.append(CheckpointSaved, step=step, **fields)
        self._next_step += 1
        self._by_id[fields["checkpoint_id"]] = step
        waiting = self._waiting.pop(fields["checkpoint_id"], None)
        if waiting is not None:
            waiting.set()
        return step

    def delete(self, steps: list[int], reason: str) -> None:
        """Queue a CheckpointsDeleted (no-op without steps); deltas restart from whole values."""
        if not steps:
            return
        self.append(CheckpointsDeleted, steps=sorted(steps), reason=reason)
        self.last.clear()
        self.reindex()

    def reindex(self) -> None:
        """Rebuild the id -> step index (and the next free step) from the view."""
        self._by_id = {g.checkpoint_id: step for step, g in live_checkpoints(self.view)}
        self._next_step = max(self.view.steps, default=-1) + 1

    def graph(self, step: int) -> GraphCheckpoint:
        """The checkpoint saved as ``step``."""
        graph = self.view.steps[step].graph
        if graph is None:
            raise GraphStateError(f"step {step} is not a LangGraph checkpoint", run_id=self.run_id)
        return graph

    async def step_of(self, checkpoint_id: str) -> int:
        """The step of checkpoint ``checkpoint_id``, waiting while LangGraph is still saving it."""
        if (step := self._by_id.get(checkpoint_id)) is not None:
            return step
        arrived = self._waiting.setdefault(checkpoint_id, asyncio.Event())
        try:
            await within(arrived.wait(), self._checkpoint_wait_s)
        except TimeoutError as e:
            self._waiting.pop(checkpoint_id, None)
            msg = (
                f"checkpoint {checkpoint_id} was never saved within {self._checkpoint_wait_s} s; "
                "writes and effects need the checkpoint their task ran from (durability "
                "'sync' or 'async', not 'exit')"
            )
            raise GraphStateError(msg, run_id=self.run_id) from e
        return self._by_id[checkpoint_id]

    # --- flushing and closing -------------------------------------------------------------

    async def flush(self) -> None:
        """Publish everything appended so far (in order); raises if an earlier flush failed."""
        # One loop turn first: LangGraph saves a task's writes and the next checkpoint from two
        # tasks started together; letting the second append before the first takes the batch
        # puts both in one Kafka transaction (one commit per step instead of two).
        await asyncio.sleep(0)
        async with self._flush_lock:
            await self.writer.flush()

    def pause_reason(self) -> tuple[str, dict[str, Any]]:
        """Why the thread waits once released: an interrupt of its newest root checkpoint, or
        simply the next input."""
        root = [(g.checkpoint_id, g) for _, g in live_checkpoints(self.view) if g.ns == ""]
        if root:
            _, newest = max(root, key=lambda item: item[0])
            asked = [w.task_id for w in newest.writes if w.channel == INTERRUPT]
            if asked:
                payload = {"checkpoint_id": newest.checkpoint_id, "interrupted_tasks": asked}
                return "interrupt", payload
        return "awaiting_input", {"thread_id": self.thread_id}

    async def close(self, payload_json: str, reason: str) -> None:
        """Record that the thread now waits (RunPaused), then release the lease (idempotent)."""
        if self._closed:
            return
        try:
            if self.usable:
                self.append(RunPaused, reason=reason, payload_json=payload_json)
                await self.flush()
        except AgentLedgerError as e:
            self.log.warning("thread_pause_not_recorded", error=str(e))
        finally:
            self._closed = True
            await self.keeper.stop()
            self.log.info("thread_released", reason=reason)
