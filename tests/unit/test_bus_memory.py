"""What the in-memory log adds for tests: held commits, crashes, raw poison records."""

from __future__ import annotations

import asyncio

import pytest

from agentledger.bus.fencing import claim_rounds, stale_claims
from agentledger.bus.memory import MemoryEventLog
from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import FenceGuard, Holder
from agentledger.errors import PublishError, RunLogCorruptError
from agentledger.events import StepStarted, TopicNames


def started(run: str, seq: int = 1, fence: int = 1) -> StepStarted:
    """A minimal run event."""
    return StepStarted(
        run_id=run, seq=seq, fence=fence, worker_id="w", step=0, step_name="s", attempt=1
    )


class CountingGuard(FenceGuard):
    """A guard that says nothing is stale and counts how often it was asked."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Holder]] = []

    async def stale(self, claims: dict[str, Holder]) -> set[str]:
        """Record the question; nothing is stale."""
        self.calls.append(dict(claims))
        return set()


async def test_held_publishes_commit_together_with_one_guard_call() -> None:
    """Publishes made while commits are held wait, then commit as one group, one guard call."""
    guard = CountingGuard()
    log = MemoryEventLog(guard=guard)
    log.hold_commits()
    tasks = [asyncio.create_task(log.publish([started(f"r{i}")])) for i in range(5)]
    await asyncio.sleep(0)
    assert log.held == 5
    assert log.records(log.topics.steps) == []
    await log.release_commits()
    await asyncio.gather(*tasks)
    assert guard.calls == [{f"r{i}": Holder(1, "w") for i in range(5)}]
    assert len(log.records(log.topics.steps)) == 5


async def test_crash_drops_held_publishes_and_refuses_more() -> None:
    """A crash fails every held publish, writes none of them, and refuses later writes."""
    log = MemoryEventLog()
    await log.publish([started("r", seq=1)])
    log.hold_commits()
    task = asyncio.create_task(log.publish([started("r", seq=2)]))
    await asyncio.sleep(0)
    log.crash()
    with pytest.raises(PublishError):
        await task
    with pytest.raises(PublishError):
        await log.publish([started("r", seq=3)])
    assert [e.seq for e in await log.read_run("r")] == [1]


async def test_poison_record_of_a_run_is_reported_with_its_position() -> None:
    """An undecodable record of the run makes read_run raise, naming topic, partition, offset."""
    topics = TopicNames("x.")
    log = MemoryEventLog(topics, run_partitions=3)
    await log.publish([started("r", seq=1)])
    poison = log.append_raw(topics.steps, run_key("r"), b"not avro")
    assert poison.partition == partition_for(run_key("r"), 3)
    with pytest.raises(RunLogCorruptError) as err:
        await log.read_run("r")
    (bad,) = err.value.errors
    assert (bad.topic, bad.partition, bad.offset) == (topics.steps, poison.partition, 1)
    assert f"{topics.steps}[{poison.partition}]@1" in str(err.value)


def test_claims_of_one_run_with_two_fences_go_to_separate_rounds() -> None:
    """The guard is asked one holder per run per question: conflicting fences split rounds."""
    assert claim_rounds({("a", 1, "w"), ("a", 2, "w"), ("b", 1, "w")}) == [
        {"a": Holder(1, "w"), "b": Holder(1, "w")},
        {"a": Holder(2, "w")},
    ]


def test_claims_of_one_run_with_two_owners_go_to_separate_rounds() -> None:
    """Two owners claiming the same fence of one run are asked about separately."""
    assert claim_rounds({("a", 1, "w-1"), ("a", 1, "w-2")}) == [
        {"a": Holder(1, "w-1")},
        {"a": Holder(1, "w-2")},
    ]


async def test_stale_claims_asks_once_for_all_batches() -> None:
    """All runs of all batches of one commit are checked in a single guard call."""
    guard = CountingGuard()
    batches = [[started("a")], [started("b"), started("c", fence=3)]]
    assert await stale_claims(guard, batches) == set()
    assert guard.calls == [{"a": Holder(1, "w"), "b": Holder(1, "w"), "c": Holder(3, "w")}]
