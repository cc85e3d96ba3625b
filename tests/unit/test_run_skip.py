"""One undecodable record in a run's log: the reconciler alerts instead of re-queueing, and a
RecordSkipped naming it makes the run readable again."""

from __future__ import annotations

import pytest

from agentledger.bus.partitioning import run_key
from agentledger.errors import DecodeError, RunLogCorruptError
from agentledger.events import Alert, Event, RecordSkipped, ResumeRequested, RunEvent
from agentledger.views import RunView, fold
from tests.unit.test_reconciler_service import FoldingViews, World


class ProjectedViews(FoldingViews):
    """Views as the projector keeps them: undecodable records left out (dead-lettered)."""

    async def load(self, run_id: str) -> RunView | None:
        """The fold of the run's decodable events."""
        events: list[RunEvent] = []
        for topic in self._log.topics.run_topics:
            for record in self._log.records(topic):
                if record.key != run_key(run_id):
                    continue
                try:
                    event = self._log.codec.decode(record.value)
                except DecodeError:
                    continue
                if isinstance(event, RunEvent):
                    events.append(event)
        events.sort(key=lambda e: e.seq)
        return fold(RunView(run_id=run_id), events).view if events else None


def published(w: World, kind: type[Event]) -> list[Event]:
    """The decodable events of a type on the requests, alerts and run topics."""
    found = []
    for role in ("steps", "requests", "alerts"):
        for record in w.log.records(w.log.topics.for_role(role)):
            try:
                event = w.log.codec.decode(record.value)
            except DecodeError:
                continue
            if isinstance(event, kind):
                found.append(event)
    return found


def poison(w: World, run_id: str) -> tuple[str, int, int]:
    """Append an undecodable record under the run's key; return its position."""
    record = w.log.append_raw(w.log.topics.steps, run_key(run_id), b"\xffnot avro")
    return record.topic, record.partition, record.offset


async def test_an_unreadable_orphan_is_alerted_once_and_never_requeued() -> None:
    """An orphan whose log holds an undecodable record gets one run.unreadable alert, no
    ResumeRequested (a resume would fail the same way), however many passes run."""
    w = World()
    await w.start_run("r1")
    poison(w, "r1")
    w.now[0] += 30_000
    rec = w.reconciler(views=ProjectedViews(w.log))
    for _ in range(3):
        await rec.run_once()
        w.now[0] += 31_000
    assert published(w, ResumeRequested) == []
    codes = [a.code for a in published(w, Alert) if isinstance(a, Alert)]
    assert codes.count("run.unreadable") == 1


async def test_a_skipped_record_makes_the_run_readable_and_requeued() -> None:
    """After RecordSkipped names the undecodable record, the run's log reads without it and the
    orphan is re-queued; a skip naming another position changes nothing."""
    w = World()
    await w.start_run("r1")
    topic, partition, offset = poison(w, "r1")
    with pytest.raises(RunLogCorruptError):
        await w.log.read_run("r1")
    elsewhere = dict(source_topic=topic, source_partition=partition, reason="ops")
    await w.log.publish([RecordSkipped(run_id="r1", source_offset=offset + 7, **elsewhere)])
    with pytest.raises(RunLogCorruptError):
        await w.log.read_run("r1")
    await w.log.publish([RecordSkipped(run_id="r1", source_offset=offset, **elsewhere)])
    events = await w.log.read_run("r1")
    assert [e.seq for e in events] == [1, 2]
    w.now[0] += 30_000
    await w.reconciler(views=ProjectedViews(w.log)).run_once()
    assert len(published(w, ResumeRequested)) == 1
