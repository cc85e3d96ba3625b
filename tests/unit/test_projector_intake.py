"""The projector's intake: fetched run-topic record lists formed into batches."""

from __future__ import annotations

import asyncio

from agentledger.projector.intake import Intake
from agentledger.projector.ports import Record


def records(topic: str, first: int, n: int) -> list[Record]:
    """``n`` records of partition 0 of ``topic`` from offset ``first``."""
    return [Record(topic, 0, first + i, None, b"x") for i in range(n)]


async def test_a_batch_takes_every_queued_fetch_in_order_up_to_the_cap() -> None:
    """Fetches that queued up while the fold was busy make one batch, in arrival order; a fetch
    is never split, and taking stops once the batch reaches its cap."""
    intake = Intake(["t"], batch_max=5, linger_s=0)
    first, second, third = records("t", 0, 3), records("t", 3, 3), records("t", 6, 1)
    for fetch in (first, second, third):
        await intake.put(fetch)
    assert await intake.batch() == first + second
    assert await intake.batch() == third


async def test_a_small_batch_is_folded_at_once_while_the_fold_keeps_up() -> None:
    """With nothing else queued and the previous batch under its cap, a batch does not wait for
    the linger: the records are folded as soon as they arrive."""
    intake = Intake(["t"], batch_max=100, linger_s=60)
    await intake.put(records("t", 0, 2))
    batch = await asyncio.wait_for(intake.batch(), 5)
    assert [r.offset for r in batch] == [0, 1]


async def test_a_small_batch_lingers_for_the_next_fetch_while_the_fold_is_behind() -> None:
    """After a batch that reached its cap (more was waiting than a batch holds), a batch below
    the cap waits up to the linger for more records before it is folded."""
    intake = Intake(["t"], batch_max=100, linger_s=5)
    await intake.put(records("t", 0, 100))
    assert len(await intake.batch()) == 100
    await intake.put(records("t", 100, 2))
    taking = asyncio.ensure_future(intake.batch())
    await asyncio.sleep(0)
    assert not taking.done()
    await intake.put(records("t", 102, 98))
    batch = await asyncio.wait_for(taking, 5)
    assert [r.offset for r in batch] == list(range(100, 200))


async def test_put_waits_while_the_fold_is_behind() -> None:
    """A full intake makes the fetcher wait (back-pressure) until a batch is taken."""
    intake = Intake(["t"], batch_max=1, linger_s=0)
    for n in range(8):
        await intake.put(records("t", n, 1))
    blocked = asyncio.ensure_future(intake.put(records("t", 8, 1)))
    await asyncio.sleep(0.01)
    assert not blocked.done()
    await intake.batch()
    await asyncio.wait_for(blocked, 5)


async def test_a_drained_fetch_is_cut_into_batches_of_whole_partition_numbers() -> None:
    """Everything a fetch drained (topic after topic) is handed over by partition number: every
    topic's records of a number in one list, each partition in offset order, lists of about a
    batch each."""
    intake = Intake(["a", "b"], batch_max=4, linger_s=0)
    fetched = [Record(t, p, o, None, b"x") for t in ("a", "b") for p in (1, 0) for o in range(3)]
    await intake.put_fetch(list(fetched))
    first, second = await intake.batch(), await intake.batch()
    assert {r.partition for r in first} == {0}
    assert {r.partition for r in second} == {1}
    for batch in (first, second):
        for topic in ("a", "b"):
            assert [r.offset for r in batch if r.topic == topic] == [0, 1, 2]
