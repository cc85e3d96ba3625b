"""The pass's pacing: a batch claimed ahead reads its views in order, while few runs wait."""

from __future__ import annotations

import asyncio

import pytest

from agentledger.reconciler.pacing import ViewTurns


async def _settle() -> None:
    """Let every task that can run, run."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_views_are_read_in_batch_order_while_fewer_than_low_runs_are_pending() -> None:
    """Batches start their view reads in order while fewer than ``low`` runs are pending (turns
    overlap); the next waits until lookups bring the pending runs below the mark, and a batch
    that drops out (finished without a turn) hands the turn on."""
    turns = ViewTurns(low=4)
    started: list[int] = []
    release = asyncio.Event()

    async def read(batch: int, runs: int) -> None:
        async with turns.turn(batch, runs):
            started.append(batch)
            await release.wait()

    async with asyncio.TaskGroup() as tg:
        tg.create_task(read(3, 1))
        tg.create_task(read(1, 3))
        tg.create_task(read(0, 2))
        await _settle()
        assert started == [0, 1], "batch 1 starts while batch 0's read is under way"
        await turns.looked_up()
        await _settle()
        assert started == [0, 1], "4 pending runs: not below the mark"
        await turns.looked_up()
        await _settle()
        assert started == [0, 1], "batch 3 waits for batch 2, which has not started"
        await turns.finished(2)
        await turns.finished(2)  # idempotent, as every exit path calls it
        await _settle()
        assert started == [0, 1, 3]
        release.set()


async def test_a_failed_view_read_leaves_no_run_pending() -> None:
    """A batch whose view read fails counts its runs out again, so the next batch's turn comes."""
    turns = ViewTurns(low=2)
    with pytest.raises(RuntimeError):
        async with turns.turn(0, 5):
            raise RuntimeError
    async with asyncio.timeout(5):
        async with turns.turn(1, 1):
            pass
