"""A Coalescer sends the calls made together as one batch and answers each caller."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from agentledger.coalesce import MAX_BATCH, Coalescer


class Recorder:
    """A ``send_many`` that records its batches, answers ``arg * 10``, and can be held or fail."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate: asyncio.Event | None = None
        self.fail: Exception | None = None

    async def send_many(self, args: Sequence[int]) -> list[int]:
        self.batches.append(list(args))
        if self.gate is not None:
            await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return [a * 10 for a in args]


async def test_calls_made_together_go_as_one_batch_and_each_gets_its_answer() -> None:
    """Three calls of one loop turn: one batch, each caller its own answer, in order."""
    rec = Recorder()
    batcher = Coalescer(rec.send_many, name="t")
    assert await asyncio.gather(batcher(1), batcher(2), batcher(3)) == [10, 20, 30]
    assert rec.batches == [[1, 2, 3]]


async def test_calls_made_while_a_batch_is_in_flight_go_in_the_next() -> None:
    """A call made while a batch waits for its answer is sent after it, with its fellows."""
    rec = Recorder()
    rec.gate = asyncio.Event()
    batcher = Coalescer(rec.send_many, name="t")
    first = asyncio.ensure_future(batcher(1))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    later = asyncio.ensure_future(asyncio.gather(batcher(2), batcher(3)))
    await asyncio.sleep(0)
    assert rec.batches == [[1]]
    rec.gate.set()
    assert await first == 10
    assert await later == [20, 30]
    assert rec.batches == [[1], [2, 3]]


async def test_a_batchs_error_reaches_each_of_its_callers_and_the_next_batch_runs() -> None:
    """Every caller of a failed batch gets its error; a later call is answered."""
    rec = Recorder()
    rec.fail = ConnectionError("down")
    batcher = Coalescer(rec.send_many, name="t")
    answers = await asyncio.gather(batcher(1), batcher(2), return_exceptions=True)
    assert all(isinstance(a, ConnectionError) for a in answers)
    rec.fail = None
    assert await batcher(4) == 40


async def test_a_caller_cancelled_before_its_batch_is_not_sent() -> None:
    """Nothing is sent for a call whose caller was cancelled while it waited in the queue."""
    rec = Recorder()
    rec.gate = asyncio.Event()
    batcher = Coalescer(rec.send_many, name="t")
    first = asyncio.ensure_future(batcher(1))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    dropped = asyncio.ensure_future(batcher(2))
    kept = asyncio.ensure_future(batcher(3))
    await asyncio.sleep(0)
    dropped.cancel()
    rec.gate.set()
    assert (await first, await kept) == (10, 30)
    with pytest.raises(asyncio.CancelledError):
        await dropped
    assert rec.batches == [[1], [3]]


async def test_a_long_queue_goes_in_batches_of_at_most_max_batch() -> None:
    """More calls than a batch holds are sent in several, every caller answered."""
    rec = Recorder()
    batcher = Coalescer(rec.send_many, name="t")
    count = MAX_BATCH + 3
    assert await asyncio.gather(*(batcher(i) for i in range(count))) == [
        i * 10 for i in range(count)
    ]
    assert [len(b) for b in rec.batches] == [MAX_BATCH, 3]
