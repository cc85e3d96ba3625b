"""A rebuild worker forked from the command's process (projector/forking.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import pytest

from agentledger.errors import RebuildWorkerError
from agentledger.projector.bulk import BulkCounts
from agentledger.projector.forking import fork_child


async def _counting(tell: Callable[[int], None]) -> BulkCounts:
    # runs in the child, on a loop of its own: the parent's loop would not be running there
    await asyncio.sleep(0)
    tell(7)
    return BulkCounts(records=7, applied=5, dead_letters=2, runs_written=1, cpu_s=99.0)


async def _failing(tell: Callable[[int], None]) -> BulkCounts:
    await asyncio.sleep(0)
    msg = "no Redis here"
    raise ConnectionError(msg)


async def _sleeping(tell: Callable[[int], None]) -> BulkCounts:
    tell(os.getpid())
    await asyncio.sleep(60)
    return BulkCounts()


async def test_a_forked_child_folds_on_its_own_loop_and_returns_its_counts() -> None:
    """The child's progress reaches the parent and its counts come back, its CPU its own."""
    heard: list[int] = []
    counts = await fork_child(_counting, heard.append, "worker 1")
    assert heard == [7]
    assert counts.records == 7
    assert (counts.applied, counts.dead_letters, counts.runs_written) == (5, 2, 1)
    assert counts.cpu_s < 99.0


async def test_a_failing_child_fails_with_its_own_error() -> None:
    """What the child raised is the worker's error, named."""
    with pytest.raises(RebuildWorkerError, match=r"worker 2 failed \(exit 1\): ConnectionError"):
        await fork_child(_failing, lambda _: None, "worker 2")


async def test_a_cancelled_parent_kills_its_child() -> None:
    """Cancelling the parent's task (another worker failed) kills and reaps the child."""
    pids: list[int] = []
    started = asyncio.Event()

    def heard(pid: int) -> None:
        pids.append(pid)
        started.set()

    task = asyncio.create_task(fork_child(_sleeping, heard, "worker 3"))
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)  # killed and reaped: no such process any more
