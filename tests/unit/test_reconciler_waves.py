"""Write waves of a reconciler batch: runs resolved together publish together, none waits long."""

from __future__ import annotations

import asyncio

from agentledger.reconciler.service import WriteWaves, batch_sizes


async def test_a_wave_opens_once_every_run_still_resolving_is_ready() -> None:
    """Two of three runs ready wait; the third's giving up (nothing to write) opens the wave."""
    waves = WriteWaves(3, linger_s=3600)
    first = asyncio.ensure_future(waves.ready())
    second = asyncio.ensure_future(waves.ready())
    await asyncio.sleep(0)
    assert not first.done()
    assert not second.done()
    waves.done()
    async with asyncio.timeout(5):
        await asyncio.gather(first, second)


async def test_a_run_ready_after_a_wave_opened_waits_only_for_the_runs_left() -> None:
    """Once a wave went, the next run ready waits for the one run still resolving, then goes."""
    waves = WriteWaves(4, linger_s=3600)
    wave = [asyncio.ensure_future(waves.ready()) for _ in range(2)]
    waves.done()
    await asyncio.sleep(0)
    assert not any(t.done() for t in wave)  # one run is still being looked up
    late = asyncio.ensure_future(waves.ready())
    async with asyncio.timeout(5):
        await asyncio.gather(*wave, late)  # the three ready runs are every run left


async def test_the_linger_bounds_the_wait_for_a_slow_run() -> None:
    """A ready run does not wait for a run still being looked up once the linger passed."""
    waves = WriteWaves(2, linger_s=0.01)
    async with asyncio.timeout(5):
        await waves.ready()  # the other run never becomes ready


def test_batches_start_small_and_double_up_to_the_batch_size() -> None:
    """A pass's first batch is short so its lookups start early; the sizes add up to the runs."""
    assert batch_sizes(1000, 128) == [16, 32, 64, 128, 128, 128, 128, 128, 128, 120]
    assert batch_sizes(10, 128) == [10]
    assert batch_sizes(40, 8) == [8, 8, 8, 8, 8]
    assert batch_sizes(0, 128) == []
