"""Runs that start in a batch are folded on an empty view without reading the store
(DESIGN.md §16, session 15); a run stored after all ends as if it had been read."""

from __future__ import annotations

from collections.abc import Sequence

from agentledger.events import Alert, StepStarted
from agentledger.projector.applier import Applier
from agentledger.projector.metrics import Metrics
from agentledger.projector.ports import Record
from agentledger.views import fold
from agentledger.views.memory_store import MemoryViewStore
from agentledger.views.store import StoredRun
from tests.unit.test_fold_into_store import CODEC, PARTS, World, expected, run_events


class CountingStore(MemoryViewStore):
    """A memory store that records the runs each ``load_runs`` was asked for."""

    def __init__(self) -> None:
        super().__init__(key_prefix="u")
        self.reads: list[list[str]] = []

    async def load_runs(
        self, namespace: str, run_ids: Sequence[str], **kw: object
    ) -> dict[str, StoredRun]:  # type: ignore[override]
        self.reads.append(list(run_ids))
        return await super().load_runs(namespace, run_ids, **kw)  # type: ignore[arg-type]


def _applier(world: World, metrics: Metrics | None = None) -> Applier:
    """A fresh applier (empty cache) over the world's store and publisher."""
    return Applier(
        world.store,
        world.published,
        CODEC,
        metrics=metrics or Metrics(),
        cache_size=100,
        partitions=PARTS,
    )


def _alerts(world: World) -> list[Alert]:
    return [e for e in world.published.events if isinstance(e, Alert)]


async def test_a_batch_of_runs_that_start_in_it_reads_no_run_from_the_store() -> None:
    """Runs whose first event is in the batch are committed without a load_runs, and their
    views are the full fold; a run that started earlier and is not cached is still read."""
    world = World()
    store = CountingStore()
    world.store = store
    ns = await store.create_namespace()
    runs = {f"r{i}": run_events(f"r{i}") for i in range(6)}
    older = run_events("old", steps=2)
    await _applier(world).apply(ns, world.write(older[:3]))
    store.reads.clear()
    records = [r for events in runs.values() for r in world.write(events)]
    await _applier(world).apply(ns, [*records, *world.write(older[3:])])
    assert store.reads == [["old"]]
    for run_id, events in runs.items():
        assert (await store.load_runs(ns, [run_id]))[run_id].view == expected(events)
    assert (await store.load_runs(ns, ["old"]))["old"].view == expected(older)


async def test_a_stored_run_whose_start_comes_again_is_refolded_from_the_store() -> None:
    """A fresh applier given a run's first events again with new ones (the store holds the
    first ones) folds unread, finds the stored run on commit and ends with the full view."""
    world = World()
    ns = await world.store.create_namespace()
    events = run_events("r1", steps=2)
    records = world.write(events)
    await _applier(world).apply(ns, records[:4])
    metrics = Metrics()
    await _applier(world, metrics).apply(ns, records)
    assert (await world.store.load_runs(ns, ["r1"]))["r1"].view == expected(events)
    assert metrics.write_conflicts == 1
    assert _alerts(world) == []


async def test_findings_of_an_unread_fold_are_those_of_the_fold_on_the_stored_run() -> None:
    """Two events at one seq: on an empty view the first delivered is applied and the other
    divergent, on the stored view the stored one is a duplicate and the other divergent; the
    alert published names the event divergent on the stored run."""
    world = World()
    ns = await world.store.create_namespace()
    first = run_events("r1", steps=1)[:1]
    stored_two = StepStarted(
        run_id="r1", seq=2, fence=1, worker_id="w1", step=0, step_name="kept", attempt=1
    )
    other_two = StepStarted(
        run_id="r1", seq=2, fence=1, worker_id="w1", step=0, step_name="other", attempt=1
    )
    await _applier(world).apply(ns, world.write([*first, stored_two]))
    stored = (await world.store.load_runs(ns, ["r1"]))["r1"].view
    redelivered: list[Record] = world.write([*first, other_two, stored_two])
    await _applier(world).apply(ns, redelivered)
    on_stored = fold(stored, [*first, other_two, stored_two])
    assert [e.event_id for e in on_stored.divergent] == [other_two.event_id]
    (alert,) = _alerts(world)
    assert alert.code == "run.seq_divergent"
    assert alert.alert_id.endswith(other_two.event_id)
    assert (await world.store.load_runs(ns, ["r1"]))["r1"].view == stored
