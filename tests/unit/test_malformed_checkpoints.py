"""A LangGraph checkpoint whose checkpoint_json the fold cannot read: a dead letter to the
projector (its batch goes on), a corrupt log to the worker (RunLogCorruptError naming it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentledger._core.loader import fold_log
from agentledger.bus.memory import MemoryEventLog
from agentledger.errors import RunLogCorruptError
from agentledger.events import CheckpointSaved, CheckpointsDeleted, RunEvent, RunForked
from agentledger.views.fold import malformed
from tests.unit.test_fold_into_store import World, expected, live, run_events

ENV: dict[str, Any] = {"run_id": "r1", "fence": 1, "worker_id": "w1"}
UNREADABLE = [
    ("{not json", "checkpoint_json is not JSON"),
    ("[1]", "checkpoint_json is a JSON list, not an object"),
    ('{"channel_versions": 3}', "checkpoint_json has channel_versions that are not an object"),
]


def saved(seq: int, step: int, checkpoint_json: str) -> CheckpointSaved:
    """Run r1's checkpoint ``c<step>`` as event ``seq``, with no blobs."""
    return CheckpointSaved(
        **ENV, seq=seq, step=step, checkpoint_id=f"c{step}", checkpoint_json=checkpoint_json,
        blob_channels=[], blob_versions=[], blob_kinds=[], blob_bases=[], blob_types=[],
        blob_values=[],
    )  # fmt: skip


def history(checkpoint_json: str) -> list[RunEvent]:
    """r1 started, a checkpoint carrying ``checkpoint_json``, then (once that checkpoint is
    dead-lettered, as seq 3 and 4) a readable one and a deletion of it, which reads every
    surviving checkpoint's channel versions."""
    started = run_events("r1", steps=1)[:1]
    later = [saved(3, 1, '{"channel_versions": {"m": 1}}'), CheckpointsDeleted(
        **ENV, seq=4, steps=[1], reason="prune")]  # fmt: skip
    return [*started, saved(2, 0, checkpoint_json), *later]


@pytest.mark.parametrize(("checkpoint_json", "reason"), UNREADABLE)
async def test_the_projector_dead_letters_a_checkpoint_the_fold_cannot_read(
    checkpoint_json: str, reason: str
) -> None:
    """The unreadable CheckpointSaved becomes a dead letter saying why, before any later
    deletion of the run would fail reading it; the batch goes on, progress passes the record."""
    world = World()
    events = history(checkpoint_json)
    other = run_events("r2", steps=1)
    recs = world.write([*events, *other])
    await world.projector().process(recs)
    (letter,) = world.letters()
    bad = recs[1]
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        bad.topic, bad.partition, bad.offset,
    )  # fmt: skip
    assert f"CheckpointSaved of run r1 at seq 2: {reason}" in letter.reason
    assert await world.store.load("r2") == expected(other)
    view = await world.store.load("r1")
    assert view is not None
    assert view.applied_seq == 1  # seq 2 never applied: 3 and 4 wait parked behind it
    progress = await world.store.read_progress(await live(world))
    assert progress[(bad.topic, bad.partition)] > bad.offset


async def test_a_readable_checkpoint_and_its_deletion_are_applied() -> None:
    """Checkpoints whose checkpoint_json is an object (with or without channel versions) are
    folded, and a deletion reading them is applied, with no dead letter."""
    world = World()
    events = history("{}")
    await world.projector().process(world.write(events))
    assert world.letters() == []
    assert await world.store.load("r1") == expected(events)


def test_a_fork_inheriting_an_unreadable_checkpoint_is_malformed() -> None:
    """A RunForked whose inherited step holds a checkpoint_json the fold cannot read is named
    malformed (dead-lettered) too: a later deletion would read it."""
    graph = {"checkpoint_id": "c0", "checkpoint_json": "{not json"}
    step = {"step": 0, "name": "c0", "status": "checkpointed", "attempt": 1, "graph": graph}
    fork = RunForked(
        **ENV, seq=2, parent_run_id="p", from_step=0, generation=1,
        inherited_json=json.dumps({"steps": [step]}),
    )  # fmt: skip
    why = malformed(fork)
    assert why is not None
    assert "inherited_json has a step whose checkpoint_json is not JSON" in why
    readable = fork.model_copy(update={"inherited_json": json.dumps({"steps": [step | {
        "graph": {"checkpoint_id": "c0", "checkpoint_json": "{}"}}]})})  # fmt: skip
    assert malformed(readable) is None


@pytest.mark.parametrize(("checkpoint_json", "reason"), UNREADABLE)
async def test_the_worker_reads_a_checkpoint_the_fold_cannot_read_as_a_corrupt_log(
    checkpoint_json: str, reason: str
) -> None:
    """The worker's own fold of such a run raises RunLogCorruptError naming the record (as for
    an undecodable one), not the fold's JSON or attribute error."""
    log = MemoryEventLog(run_partitions=2)
    await log.publish(history(checkpoint_json))
    with pytest.raises(RunLogCorruptError) as err:
        await fold_log(log, "r1")
    (bad,) = err.value.errors
    assert bad.topic == log.topics.steps
    assert reason in bad.reason
