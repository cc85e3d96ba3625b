"""The projector under a wiped view store: re-projection from the log, one alert, capped gaps."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from agentledger.events import Alert
from agentledger.events.models import Event
from agentledger.projector.findings import GAP_SEQS_SHOWN, dead_letter, gap_alert
from agentledger.projector.memory import CollectingPublisher
from agentledger.projector.ports import Record
from agentledger.projector.rebuild import compare, replay_into_new_namespace
from agentledger.views.keys import Keys
from tests.unit.test_fold_into_store import TOPICS, World, expected, run_events


def codes(alerts: list[Alert]) -> list[str]:
    return [a.code for a in alerts]


async def test_flushall_between_batches_heals_with_one_alert_and_no_gap_alert() -> None:
    """After FLUSHALL the projector re-reads every partition from the log (also the ones faust
    will not deliver again), raises one views.wiped alert and no projector.gap alert."""
    world = World(gap_alert_ms=0)
    runs = {f"r{i}": run_events(f"r{i}", steps=2) for i in range(6)}
    records = {r: world.write(events) for r, events in runs.items()}
    projector = world.projector()
    await projector.process([rec for recs in records.values() for rec in recs])
    await projector.tick()
    world.store.flushall()
    late = run_events("late", steps=1)
    await projector.process(world.write(late))
    runs["late"] = late
    for _ in range(3):
        await projector.tick()
    namespace = await world.store.live_namespace()
    assert namespace is not None
    stored = await world.store.load_runs(namespace, sorted(runs))
    assert {r: s.view for r, s in stored.items()} == {r: expected(e) for r, e in runs.items()}
    assert codes(world.alerts()) == ["views.wiped"]
    rebuilt = await replay_into_new_namespace(
        world.store, world.log, TOPICS.run_topics, partitions=2
    )
    diff = compare(
        await world.store.snapshot(namespace), await world.store.snapshot(rebuilt.namespace)
    )
    assert diff.differences == []


async def test_progress_vanishing_under_a_live_pointer_is_a_wipe() -> None:
    """A deleted progress hash (the pointer still there) is found at the next write: nothing is
    written on top, a fresh namespace is re-projected and one views.wiped alert says so."""
    world = World()
    first = run_events("a", steps=1)
    projector = world.projector()
    await projector.process(world.write(first))
    namespace = await world.store.live_namespace()
    assert namespace is not None
    progress_key = Keys("u").space(namespace).progress()
    world.store._delete(progress_key)
    second = run_events("b", steps=1)
    await projector.process(world.write(second))
    await projector.tick()
    live = await world.store.live_namespace()
    assert live is not None
    assert live != namespace
    stored = await world.store.load_runs(live, ["a", "b"])
    assert stored["a"].view == expected(first)
    assert stored["b"].view == expected(second)
    assert codes(world.alerts()) == ["views.wiped"]
    assert namespace not in await world.store.namespaces()


def test_gap_alert_names_at_most_a_few_parked_seqs() -> None:
    """A gap with 2,000 parked events gives a small alert: the count, and the first seqs only."""
    alert = gap_alert("r", 1, list(range(3, 2003)), 30_000)
    detail = json.loads(alert.detail_json)
    assert detail["parked_count"] == 2000
    assert detail["parked_seqs"] == list(range(3, 3 + GAP_SEQS_SHOWN))
    assert len(alert.summary) + len(alert.detail_json) < 1000
    assert "1980 more" in alert.summary


def test_a_dead_letter_of_a_huge_record_fits_the_publisher_limit() -> None:
    """A poison record near 1 MiB gives a dead letter well under 1 MiB that names where the
    whole record is, with an id from its position (a redo gives the same letter)."""
    rec = Record(TOPICS.steps, 0, 7, b"k" * 5000, b"\x00" * (1024 * 1024 - 100))
    letter = dead_letter(rec, "cannot decode")
    size = len(letter.value or b"") + len(letter.key or b"") + len(letter.reason)
    assert size < 128 * 1024
    assert f"{TOPICS.steps}:0@7" in letter.reason
    assert dead_letter(rec, "cannot decode").event_id == letter.event_id


class AlertsFailOnce(CollectingPublisher):
    """Publishes like the collector, except that the first publication of alerts fails."""

    def __init__(self) -> None:
        super().__init__()
        self.failed = False

    async def publish(self, events: Sequence[Event]) -> None:
        """Fail once on alerts, then collect."""
        if not self.failed and any(isinstance(e, Alert) for e in events):
            self.failed = True
            msg = "the alerts topic is down"
            raise OSError(msg)
        await super().publish(events)


async def test_a_batch_retried_after_a_failure_publishes_its_dead_letters_once() -> None:
    """Dead letters already published are not published again when the batch is redone."""
    world = World()
    world.published = AlertsFailOnce()
    owner = run_events("r", steps=1, fence=2)
    stale = run_events("r", steps=1, fence=1, first=len(owner) + 1)[:1]
    records = world.write(owner) + world.write(stale)
    records += [world.log.append(TOPICS.steps, 0, b"\xffjunk") for _ in range(3)]
    projector = world.projector()
    with pytest.raises(OSError, match="alerts topic"):
        await projector.process(records)
    await projector.reset_delivery()
    await projector.process(records)
    assert len(world.letters()) == 3
    assert codes(world.alerts()) == ["fence.stale"]
