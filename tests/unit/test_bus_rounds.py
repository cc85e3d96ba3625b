"""Rounds: concurrent callers share lookups, never get an answer older than their call."""

from __future__ import annotations

import asyncio

import pytest

from agentledger.bus.rounds import Rounds
from agentledger.errors import UnreachableError


class Source:
    """A lookup whose answers are the round number, held until released."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.fail_next = False

    async def lookup(self, keys: list[str]) -> dict[str, int]:
        """Answer every key with the number of this call (1-based)."""
        self.calls.append(keys)
        number = len(self.calls)
        self.started.set()
        await self.release.wait()
        if self.fail_next:
            self.fail_next = False
            raise UnreachableError("Kafka", "test", "asking end offsets")
        return dict.fromkeys(keys, number)


async def test_concurrent_callers_share_one_lookup_of_every_key() -> None:
    """Callers waiting together are answered by one lookup asked for the union of their keys."""
    source = Source()
    rounds = Rounds(source.lookup, name="t")
    source.release.set()
    answers = await asyncio.gather(*(rounds.ask([f"k{i % 3}", "all"]) for i in range(30)))
    assert source.calls == [["k0", "all", "k1", "k2"]]
    assert answers[1] == {"k1": 1, "all": 1}


async def test_a_caller_arriving_during_a_lookup_waits_for_the_next_one() -> None:
    """A caller who asks while a lookup is in flight gets the next lookup's answer, not that one."""
    source = Source()
    rounds = Rounds(source.lookup, name="t")
    first = asyncio.ensure_future(rounds.ask(["a"]))
    await source.started.wait()
    late = asyncio.ensure_future(rounds.ask(["a"]))
    await asyncio.sleep(0)
    source.release.set()
    assert await first == {"a": 1}
    assert await late == {"a": 2}
    assert rounds.lookups == 2


async def test_a_failed_lookup_fails_its_round_and_the_next_round_recovers() -> None:
    """Every caller of a failed round gets the error; a later call is looked up again."""
    source = Source()
    source.fail_next = True
    rounds = Rounds(source.lookup, name="t")
    source.release.set()
    results = await asyncio.gather(rounds.ask(["a"]), rounds.ask(["b"]), return_exceptions=True)
    assert all(isinstance(r, UnreachableError) for r in results)
    assert await rounds.ask(["a"]) == {"a": 2}


async def test_stop_cancels_the_callers_of_the_round_in_flight() -> None:
    """Stopping does not leave a caller waiting forever for a lookup that will never answer."""
    source = Source()
    rounds = Rounds(source.lookup, name="t")
    caller = asyncio.ensure_future(rounds.ask(["a"]))
    await source.started.wait()
    await rounds.stop()
    with pytest.raises(asyncio.CancelledError):
        await caller
