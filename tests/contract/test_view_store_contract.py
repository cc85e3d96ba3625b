"""The view-store contract: every ViewStore (memory, Redis) behaves the same, key for key."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import pytest_asyncio

from agentledger.bus.partitioning import partition_for, run_key
from agentledger.bus.port import Position
from agentledger.errors import ViewsRegressedError, ViewsWipedError
from agentledger.events import EffectIntended, EffectRecorded, RunFinished, RunStarted, StepStarted
from agentledger.events.codec import EventCodec
from agentledger.events.models import RunEvent
from agentledger.projector.applier import Applier, index_update
from agentledger.projector.bulk import BulkCounts, PartitionFold
from agentledger.projector.memory import CollectingPublisher
from agentledger.projector.metrics import Metrics
from agentledger.projector.ports import Record
from agentledger.settings import CommonSettings
from agentledger.views import RunView, fold
from agentledger.views.keys import STATUSES, Keys
from agentledger.views.memory_store import MemoryViewStore
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import IndexUpdate, OpenIntent, RunWrite, StoredRun, ViewStore
from agentledger.views.store import TopicPartition as Tp

DAY = 24 * 3600 * 1000
CODEC = EventCodec()


class Clock:
    """A settable epoch-ms clock shared with the memory store."""

    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def env(run: str, seq: int, fence: int = 1, at: int = 0) -> dict[str, object]:
    return {"run_id": run, "seq": seq, "fence": fence, "worker_id": "w", "occurred_at": at or seq}


def run_events(run: str, *, finished_at: int | None = None) -> list[RunEvent]:
    events: list[RunEvent] = [
        RunStarted(**env(run, 1), agent="a", plan=["a", "b"]),  # type: ignore[arg-type]
        StepStarted(**env(run, 2), step=0, step_name="a", attempt=1),  # type: ignore[arg-type]
        EffectIntended(
            **env(run, 3, at=30),  # type: ignore[arg-type]
            step=0,
            ordinal=0,
            effect="pay",
            provider="p",
            kind="payments",
            idempotency_key=f"{run}:k0",
            identity_hash="i",
            payload_hash="h",
        ),
    ]
    if finished_at is not None:
        events.append(
            EffectRecorded(
                **env(run, 4),  # type: ignore[arg-type]
                step=0,
                effect="pay",
                idempotency_key=f"{run}:k0",
                outcome="succeeded",
            )
        )
        events.append(RunFinished(**env(run, 5, at=finished_at), status="succeeded"))  # type: ignore[arg-type]
    return events


def write_of(stored: StoredRun | None, run: str, events: list[RunEvent]) -> RunWrite:
    """Fold ``events`` onto the stored run, as the projector does."""
    base = stored.view if stored else RunView(run_id=run)
    parked = stored.parked if stored else []
    result = fold(base, parked + events)
    return RunWrite(
        run_id=run,
        expected=stored.token if stored else None,
        view=result.view,
        steps=result.touched_steps,
        effects=result.touched_effects,
        parked=result.parked,
        parked_changed=True,
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(
    params=[
        "memory",
        pytest.param("redis", marks=pytest.mark.integration),
        pytest.param("redis-sharded", marks=pytest.mark.integration),
    ]
)
def backend(request: pytest.FixtureRequest) -> tuple[CommonSettings, bool] | None:
    """None for the memory store, else settings on the real stack and whether the namespaces
    are sharded by partition (the Redis Cluster layout, here on one Redis)."""
    if request.param == "memory":
        return None
    settings: CommonSettings = request.getfixturevalue("ledger_settings")
    return settings, request.param == "redis-sharded"


@pytest_asyncio.fixture(loop_scope="session")
async def store(
    backend: tuple[CommonSettings, bool] | None, clock: Clock
) -> AsyncIterator[ViewStore]:
    """One store of each implementation, with a 1-day retention."""
    if backend is None:
        async with MemoryViewStore(key_prefix="c", retention_ms=DAY, clock=clock) as mem:
            yield mem
        return
    settings, sharded = backend
    assert settings.redis_url is not None
    async with RedisViewStore.from_url(
        settings.redis_url, key_prefix=settings.key_prefix, retention_ms=DAY, clock=clock
    ) as red:
        if sharded:
            async with RedisViewStore(
                red.client,
                key_prefix=settings.key_prefix,
                retention_ms=DAY,
                clock=clock,
                partitions=4,
                sharded=True,
            ) as shard:
                yield shard
        else:
            yield red


def key(namespace: str, run: str, part: str) -> str:
    """The snapshot name of one key of a run, in the layout of ``namespace``."""
    space = Keys("x").space(namespace)
    return space.relative(space.run(run, part))


async def live(store: ViewStore) -> str:
    ns = await store.live_namespace(create=True)
    assert ns is not None
    return ns


async def put(store: ViewStore, ns: str, run: str, events: list[RunEvent]) -> RunWrite:
    stored = (await store.load_runs(ns, [run])).get(run)
    write = write_of(stored, run, events)
    outcome = await store.write_runs(ns, [write])
    assert not outcome.conflicts
    return write


async def test_written_run_loads_back_equal(store: ViewStore) -> None:
    """A run written once loads back as the same view, through the live pointer too."""
    ns = await live(store)
    assert await store.load("r1") is None
    write = await put(store, ns, "r1", run_events("r1"))
    loaded = (await store.load_runs(ns, ["r1"]))["r1"]
    assert loaded.view == write.view
    assert loaded.token == (3, 0)
    assert await store.load("r1") == write.view


async def test_several_runs_load_together_as_each_alone(store: ViewStore) -> None:
    """Loading many runs at once gives each run's view, token and parked events as loading it
    alone does, and leaves out the runs never written."""
    ns = await live(store)
    events = run_events("r2")
    await put(store, ns, "r1", run_events("r1"))
    await put(store, ns, "r2", [events[0], events[2]])
    await put(store, ns, "r3", run_events("r3")[:2])
    together = await store.load_runs(ns, ["r1", "never", "r2", "r3"])
    assert sorted(together) == ["r1", "r2", "r3"]
    for run in ("r1", "r2", "r3"):
        alone = (await store.load_runs(ns, [run]))[run]
        assert together[run].view == alone.view
        assert together[run].token == alone.token
        assert together[run].parked == alone.parked
    assert [e.seq for e in together["r2"].parked] == [3]


async def test_write_with_a_moved_token_is_a_conflict_and_changes_nothing(
    store: ViewStore,
) -> None:
    """Two writers folding from the same token: the second is told, its write is dropped."""
    ns = await live(store)
    events = run_events("r1")
    first = write_of(None, "r1", events[:2])
    second = write_of(None, "r1", events[:1])
    assert not (await store.write_runs(ns, [first])).conflicts
    outcome = await store.write_runs(ns, [second])
    assert outcome.conflicts == {"r1"}
    assert (await store.load_runs(ns, ["r1"]))["r1"].view == first.view


async def test_parked_events_are_stored_with_the_run_and_count_in_its_token(
    store: ViewStore,
) -> None:
    """Events ahead of a gap are kept with the run and come back for the next fold."""
    ns = await live(store)
    events = run_events("r1")
    await put(store, ns, "r1", [events[0], events[2]])
    stored = (await store.load_runs(ns, ["r1"]))["r1"]
    assert stored.token == (1, 1)
    assert [e.seq for e in stored.parked] == [3]
    await put(store, ns, "r1", [events[1]])
    stored = (await store.load_runs(ns, ["r1"]))["r1"]
    assert stored.token == (3, 0)
    assert stored.parked == []
    assert key(ns, "r1", "parked") not in await store.snapshot(ns)


async def test_only_touched_steps_and_effects_are_rewritten(store: ViewStore) -> None:
    """A write leaves untouched steps and effects as they were stored."""
    ns = await live(store)
    write = await put(store, ns, "r1", run_events("r1"))
    stored = (await store.load_runs(ns, ["r1"]))["r1"]
    view = stored.view.model_copy(deep=True)
    view.steps[0].name = "changed-but-untouched"
    view.applied_seq = 4
    partial = RunWrite(run_id="r1", expected=stored.token, view=view, steps=set(), effects=set())
    assert not (await store.write_runs(ns, [partial])).conflicts
    again = (await store.load_runs(ns, ["r1"]))["r1"]
    assert again.view.steps[0].name == write.view.steps[0].name
    assert again.view.applied_seq == 4


async def test_a_drop_mark_is_stored_with_the_run_and_counts_in_its_token(
    store: ViewStore,
) -> None:
    """Parked events dropped over the cap: the run keeps the lowest dropped seq, its token
    counts the mark as one more parked entry, readers see it, and clearing it is stored too."""
    ns = await live(store)
    events = run_events("r1", finished_at=50)
    marked = write_of(None, "r1", [events[0], events[2]])
    marked.dropped_from = 4
    assert not (await store.write_runs(ns, [marked])).conflicts
    stored = (await store.load_runs(ns, ["r1"]))["r1"]
    assert (stored.token, stored.dropped_from, [e.seq for e in stored.parked]) == ((1, 2), 4, [3])
    at = await store.load_at("r1", [])
    assert at is not None
    assert at.dropped_from == 4
    stale = write_of(None, "r1", [events[0]])
    stale.expected = (1, 1)  # the token of the run before the mark: a conflict
    assert (await store.write_runs(ns, [stale])).conflicts == {"r1"}
    cleared = write_of(stored, "r1", events[1:])
    assert not (await store.write_runs(ns, [cleared])).conflicts
    again = (await store.load_runs(ns, ["r1"]))["r1"]
    assert (again.token, again.dropped_from, again.parked) == ((5, 0), 0, [])


async def test_the_applier_never_parks_more_than_its_cap_in_the_store(store: ViewStore) -> None:
    """Events ahead of a gap beyond the applier's cap are not stored: the parked hash holds the
    cap's lowest seqs and the run the lowest dropped seq, written with the view."""
    ns = await live(store)
    events = run_events("r1", finished_at=50)
    published = CollectingPublisher()
    applier = Applier(store, published, CODEC, metrics=Metrics(), parked_max=2)
    for offset, event in enumerate(reversed(events[1:])):  # seqs 5, 4, 3, 2: 1 never comes
        record = Record("t", 0, offset, run_key("r1"), CODEC.encode(event))
        await applier.apply(ns, [record])
        stored = (await store.load_runs(ns, ["r1"]))["r1"]
        assert len(stored.parked) <= 2
        parked_hash = (await store.snapshot(ns)).get(key(ns, "r1", "parked"))
        assert parked_hash is not None
        assert isinstance(parked_hash[1], dict)
        assert len(parked_hash[1]) <= 2
    assert sorted(e.seq for e in stored.parked) == [2, 3]
    assert stored.dropped_from == 4
    assert await store.overdue_parked(ns, 2**62) == ["r1"]


async def test_finished_runs_get_a_ttl_and_runs_past_retention_are_deleted(
    store: ViewStore, clock: Clock
) -> None:
    """Retention: a finished run's keys expire; one already past retention is not stored."""
    ns = await live(store)
    clock.now = 10 * DAY
    await put(store, ns, "fresh", run_events("fresh", finished_at=clock.now - 1000))
    snap = await store.snapshot(ns)
    assert snap[key(ns, "fresh", "run")][2]
    assert snap[key(ns, "fresh", "effects")][2]
    await put(store, ns, "open", run_events("open"))
    assert not (await store.snapshot(ns))[key(ns, "open", "run")][2]
    old = write_of(None, "old", run_events("old", finished_at=clock.now - 2 * DAY))
    outcome = await store.write_runs(ns, [old])
    assert outcome.expired == {"old"}
    assert "old" not in await store.load_runs(ns, ["old"])


async def test_indexes_list_runs_by_status_and_open_intents_oldest_first(
    store: ViewStore,
) -> None:
    """Status moves and intent closes are reflected; cut-off and limit apply."""
    ns = await live(store)
    await store.update_indexes(
        ns,
        [
            IndexUpdate("a", "running", 20, open_intents={"ka": 50}),
            IndexUpdate("b", "running", 10, open_intents={"kb": 40, "kb2": 60}),
        ],
    )
    assert await store.runs_by_status("running") == ["b", "a"]
    assert [i.idempotency_key for i in await store.open_intents()] == ["kb", "ka", "kb2"]
    assert [i.idempotency_key for i in await store.open_intents(older_than=50)] == ["kb"]
    assert len(await store.open_intents(limit=2)) == 2
    await store.update_indexes(
        ns,
        [
            IndexUpdate(
                "b", "succeeded", 30, drop_statuses=("running",), closed_intents=frozenset({"kb"})
            )
        ],
    )
    assert await store.runs_by_status("running") == ["a"]
    assert await store.runs_by_status("succeeded") == ["b"]
    intents = await store.open_intents()
    assert [(i.run_id, i.idempotency_key, i.intended_at) for i in intents] == [
        ("a", "ka", 50),
        ("b", "kb2", 60),
    ]
    await store.update_indexes(ns, [IndexUpdate("b", None)])
    assert await store.runs_by_status("succeeded") == []


async def test_parked_index_reports_runs_parked_before_a_time(
    store: ViewStore, clock: Clock
) -> None:
    """A run stays in the parked index from when it first parked until it is un-parked; the
    index's count is the number of runs in it."""
    ns = await live(store)
    await store.update_indexes(ns, [IndexUpdate("p", "running", 1, parked=True)])
    far_future = 2**50
    assert await store.overdue_parked(ns, far_future) == ["p"]
    assert await store.overdue_parked(ns, 0) == []
    assert await store.count_parked(ns) == 1
    await store.update_indexes(ns, [IndexUpdate("q", "running", 3, parked=True)])
    assert await store.count_parked(ns) == 2
    await store.update_indexes(ns, [IndexUpdate("p", "running", 2, parked=False)])
    assert await store.overdue_parked(ns, far_future) == ["q"]
    assert await store.count_parked(ns) == 1


async def test_progress_only_rises_and_answers_the_resume_barrier(store: ViewStore) -> None:
    """Recorded offsets never go back; progress() is True once every position is reached."""
    assert not await store.progress([Position("t", 0, 5)])
    assert await store.progress([Position("t", 0, 0)])
    ns = await live(store)
    await store.record_progress(ns, {("t", 0): 10, ("t", 1): 3})
    await store.record_progress(ns, {("t", 0): 7})
    assert await store.read_progress(ns) == {("t", 0): 10, ("t", 1): 3}
    assert await store.progress([Position("t", 0, 10), Position("t", 1, 3)])
    assert not await store.progress([Position("t", 0, 10), Position("t", 1, 4)])
    assert not await store.progress([Position("t", 2, 1)])


async def test_load_many_at_gives_each_run_what_load_at_gives(store: ViewStore) -> None:
    """One batched read answers each run as load_at does: its view, its parked events, and the
    progress on its own partitions only (a run never stored has no view, progress 0 if unset)."""
    assert await store.load_many_at({"r1": [("t", 0)]}) is None  # no live namespace yet
    ns = await live(store)
    await put(store, ns, "r1", run_events("r1"))
    await put(store, ns, "gap", [run_events("gap")[0], run_events("gap")[2]])  # seq 3 parks
    await store.record_progress(ns, {("t", 0): 10, ("t", 1): 3})
    wanted = {"r1": [("t", 0)], "gap": [("t", 1), ("t", 2)], "never": [("t", 0)]}
    found = await store.load_many_at(wanted)
    assert found is not None
    assert set(found) == set(wanted)
    for run_id, partitions in wanted.items():
        one = await store.load_at(run_id, partitions)
        assert one is not None
        assert found[run_id].view == one.view
        assert found[run_id].parked == one.parked
        assert found[run_id].progress == one.progress
    assert found["r1"].progress == {("t", 0): 10}
    assert found["gap"].progress == {("t", 1): 3, ("t", 2): 0}
    assert [e.seq for e in found["gap"].parked] == [3]
    assert found["never"].view is None


async def test_a_brief_load_gives_the_fields_asked_for_and_the_effects(store: ViewStore) -> None:
    """load_many_at(only=...) answers as the whole read does for the fields named, the effects,
    the parked events and the progress; the other run fields may be left at their defaults."""
    ns = await live(store)
    await put(store, ns, "r1", run_events("r1"))
    await put(store, ns, "gap", [run_events("gap")[0], run_events("gap")[2]])  # seq 3 parks
    await store.record_progress(ns, {("t", 0): 10})
    wanted = {"r1": [("t", 0)], "gap": [("t", 0)], "never": [("t", 0)]}
    only = {"run_id", "status", "applied_seq", "fence", "pause"}
    brief = await store.load_many_at(wanted, only=only)
    whole = await store.load_many_at(wanted)
    assert brief is not None
    assert whole is not None
    for run_id in wanted:
        b, w = brief[run_id], whole[run_id]
        assert (b.progress, b.parked) == (w.progress, w.parked)
        if w.view is None:
            assert b.view is None
            continue
        assert b.view is not None
        for name in only:
            assert getattr(b.view, name) == getattr(w.view, name)
        assert b.view.effects.plain() == w.view.effects.plain()
        assert b.view.open_effects() == w.view.open_effects()
    r1 = brief["r1"].view
    assert r1 is not None
    assert (r1.status, r1.applied_seq) == ("running", 3)


async def test_a_brief_load_of_runs_keeps_their_tokens_parked_events_and_drop_marks(
    store: ViewStore,
) -> None:
    """load_runs(only=...) of several runs gives each stored run's token, dropped seq, parked
    events, effects and the fields named as the whole read does, no steps, and no entry for
    a run that is not stored."""
    ns = await live(store)
    await put(store, ns, "r1", run_events("r1"))
    events = run_events("marked")
    marked = write_of(None, "marked", [events[0], events[2]])  # seq 3 parks behind the gap
    marked.dropped_from = 4
    assert not (await store.write_runs(ns, [marked])).conflicts
    runs = ["r1", "never", "marked"]
    only = {"run_id", "status", "applied_seq", "fence", "pause"}
    brief = await store.load_runs(ns, runs, only=only)
    whole = await store.load_runs(ns, runs)
    assert set(brief) == set(whole) == {"r1", "marked"}
    for run_id, w in whole.items():
        b = brief[run_id]
        assert (b.token, b.dropped_from, b.parked) == (w.token, w.dropped_from, w.parked)
        for name in only:
            assert getattr(b.view, name) == getattr(w.view, name)
        assert b.view.effects.plain() == w.view.effects.plain()
        assert not b.view.steps
    assert whole["r1"].view.steps  # the whole read has them
    assert (brief["marked"].token, brief["marked"].dropped_from) == ((1, 2), 4)


async def test_swap_points_readers_at_another_namespace_in_one_step(store: ViewStore) -> None:
    """Readers follow the pointer; the old namespace can then be dropped, the live one cannot."""
    old = await live(store)
    assert await store.live_namespace(create=True) == old
    await put(store, old, "r1", run_events("r1")[:1])
    fresh = await store.create_namespace()
    assert fresh != old
    assert await store.load("r1") is not None
    assert await store.swap(fresh) == old
    assert await store.live_namespace() == fresh
    assert await store.load("r1") is None
    assert await store.drop_namespace(fresh) == 0
    assert await store.drop_namespace(old) >= 1
    assert await store.snapshot(old) == {}
    assert await store.namespaces() == [fresh]


async def test_prune_drops_index_entries_of_runs_whose_keys_are_gone(store: ViewStore) -> None:
    """Index members of a run whose keys no longer exist are removed by prune."""
    ns = await live(store)
    await put(store, ns, "kept", run_events("kept"))
    await store.update_indexes(
        ns,
        [
            IndexUpdate("kept", "running", 1, open_intents={"kept:k0": 30}),
            IndexUpdate("gone", "succeeded", 1, open_intents={"g": 5}),
        ],
    )
    assert await store.prune(ns) == 1
    assert await store.runs_by_status("succeeded") == []
    assert [i.run_id for i in await store.open_intents()] == ["kept"]


async def test_finished_runs_past_retention_leave_the_status_index(store: ViewStore) -> None:
    """Finished runs last updated before the cut-off are unlisted; running ones stay."""
    ns = await live(store)
    await store.update_indexes(
        ns,
        [
            IndexUpdate("old", "succeeded", 10),
            IndexUpdate("new", "succeeded", 30),
            IndexUpdate("busy", "running", 10),
        ],
    )
    assert await store.drop_finished_before(ns, 20) == 1
    assert await store.runs_by_status("succeeded") == ["new"]
    assert await store.runs_by_status("running") == ["busy"]


StoreFactory = Callable[[], ViewStore]


@pytest.mark.integration
async def test_memory_and_redis_stores_lay_out_the_same_keys_and_values(
    ledger_settings: CommonSettings, clock: Clock
) -> None:
    """The same writes give equal snapshots in both stores (the memory store is a faithful twin)."""
    assert ledger_settings.redis_url is not None
    clock.now = 10 * DAY
    async with (
        MemoryViewStore(key_prefix="m", retention_ms=DAY, clock=clock) as mem,
        RedisViewStore.from_url(
            ledger_settings.redis_url,
            key_prefix=ledger_settings.key_prefix,
            retention_ms=DAY,
            clock=clock,
        ) as red,
    ):
        snaps = []
        events = run_events("r1", finished_at=clock.now - 5)
        others = run_events("r2")[1:]
        for st in (mem, red):
            ns = await live(st)
            await put(st, ns, "r1", [events[0], events[2]])
            await put(st, ns, "r1", events[1:])
            await put(st, ns, "r2", others)
            await st.update_indexes(
                ns,
                [
                    IndexUpdate("r1", "succeeded", 5, drop_statuses=("running",)),
                    IndexUpdate("r2", "new", 2, open_intents={"r2:k0": 30}, parked=True),
                ],
            )
            await st.record_progress(ns, {("t", 0): 3})
            snaps.append(await st.snapshot(ns))
        assert snaps[0] == snaps[1]
        assert "{r2}:parked" in snaps[0]


async def test_load_many_gives_the_stored_runs_and_leaves_out_the_unknown(
    store: ViewStore,
) -> None:
    """Several runs read together equal each one read alone; a run never stored is absent."""
    ns = await live(store)
    views = {r: (await put(store, ns, r, run_events(r))).view for r in ("lm1", "lm2")}
    loaded = await store.load_many(["lm1", "never", "lm2"])
    assert loaded == views
    assert loaded["lm1"] == await store.load("lm1")


async def test_progress_of_a_wiped_namespace_is_never_written_again(store: ViewStore) -> None:
    """Once a namespace's progress vanished (its birth mark with it), index and progress
    writes raise ViewsWipedError and write nothing; a fresh namespace can replace it once."""
    ns = await live(store)
    assert await store.is_marked(ns)
    await store.record_progress(ns, {("t", 0): 5})
    await store.drop_namespace(await store.create_namespace())
    await store.swap(await store.create_namespace())
    assert await store.drop_namespace(ns) >= 1  # its keys vanish, as in a wipe
    assert not await store.is_marked(ns)
    with pytest.raises(ViewsWipedError):
        await store.record_progress(ns, {("t", 0): 9})
    with pytest.raises(ViewsWipedError):
        await store.update_indexes(ns, [IndexUpdate(run_id="r1", status="running")])
    assert await store.read_progress(ns) == {}
    assert await store.snapshot(ns) == {}
    current = await store.live_namespace()
    assert current is not None
    fresh = await store.create_namespace()
    assert await store.replace_live(current, fresh) == fresh
    assert await store.replace_live(current, await store.create_namespace()) == fresh
    assert await store.read_progress(fresh) == {}
    await store.mark_namespace(ns)
    assert await store.is_marked(ns)


def commit_write(run: str, events: list[RunEvent]) -> tuple[RunWrite, IndexUpdate]:
    """A first write of ``run`` and its index entries, as the projector commits them."""
    write = write_of(None, run, events)
    update = IndexUpdate(run, write.view.status, write.view.updated_at, drop_statuses=STATUSES)
    return write, update


async def test_commit_stores_runs_indexes_and_progress_together(store: ViewStore) -> None:
    """One commit writes the runs, lists them and raises the progress; a second commit from
    the same tokens is a conflict that leaves its runs, their entries and progress unwritten."""
    ns = await live(store)
    home = ("t", partition_for(run_key("c1"), 4))  # where c1's events are, as in a batch
    first, first_entry = commit_write("c1", run_events("c1"))
    second, second_entry = commit_write("c2", run_events("c2"))
    outcome = await store.commit(ns, [first, second], [first_entry, second_entry], {home: 4})
    assert not outcome.conflicts
    assert not outcome.unwritten
    assert set(await store.load_many(["c1", "c2"])) == {"c1", "c2"}
    assert set(await store.runs_by_status(first.view.status)) >= {"c1", "c2"}
    assert (await store.read_progress(ns))[home] == 4
    again, again_entry = commit_write("c1", run_events("c1"))
    outcome = await store.commit(ns, [again], [again_entry], {home: 9})
    assert outcome.conflicts == {"c1"}
    assert "c1" in outcome.unwritten
    assert (await store.read_progress(ns))[home] == 4


async def test_progress_below_its_floor_writes_nothing(store: ViewStore) -> None:
    """A commit whose floor is above the stored progress (writes lost in a failover) raises
    ViewsRegressedError and writes neither the run nor the progress."""
    ns = await live(store)
    home = ("t", partition_for(run_key("f1"), 4))
    await store.record_progress(ns, {home: 5})
    write, entry = commit_write("f1", run_events("f1"))
    with pytest.raises(ViewsRegressedError):
        await store.commit(ns, [write], [entry], {home: 8}, floors={home: 6})
    with pytest.raises(ViewsRegressedError):
        await store.record_progress(ns, {home: 8}, {home: 6})
    assert await store.load("f1") is None
    assert (await store.read_progress(ns))[home] == 5
    await store.commit(ns, [write], [entry], {home: 8}, floors={home: 5})
    assert (await store.read_progress(ns))[home] == 8


def sliceable_batch(runs: list[str], partitions: int = 4) -> tuple[list[Record], dict[Tp, int]]:
    """Every event of ``runs`` as records on each run's home partition, and each partition's end."""
    records: list[Record] = []
    ends: dict[Tp, int] = {}
    for run in runs:
        tp = ("t", partition_for(run_key(run), partitions))
        for event in run_events(run, finished_at=50):
            offset = ends.get(tp, 0)
            records.append(Record(tp[0], tp[1], offset, run_key(run), CODEC.encode(event)))
            ends[tp] = offset + 1
    return records, ends


async def test_a_batch_applied_in_slices_of_partitions_equals_it_applied_whole(
    store: ViewStore,
) -> None:
    """A batch committed in slices of whole partitions, each sent while the next is folded,
    leaves the store key for key, progress included, as the same batch committed whole."""
    whole_ns = await live(store)
    sliced_ns = await store.create_namespace()
    records, ends = sliceable_batch([f"s{i}" for i in range(12)])
    assert len({r.partition for r in records}) > 2  # several slices at 5 records each
    whole = Applier(
        store, CollectingPublisher(), CODEC, metrics=Metrics(), partitions=4, slice_records=10**6
    )
    sliced = Applier(
        store, CollectingPublisher(), CODEC, metrics=Metrics(), partitions=4, slice_records=5
    )
    await whole.apply(whole_ns, records, ends)
    await sliced.apply(sliced_ns, records, ends)
    assert await store.snapshot(sliced_ns) == await store.snapshot(whole_ns)
    assert await store.read_progress(sliced_ns) == ends


async def test_a_slice_whose_run_moved_meanwhile_is_refolded_and_committed(
    store: ViewStore,
) -> None:
    """When another writer moved a run after this applier cached it, that run's slice is left
    unwritten by its commit, refolded from what is stored and committed again: every view is
    the fold of all its events and the progress reaches the batch's end."""
    ns = await live(store)
    runs = [f"m{i}" for i in range(8)]
    records, ends = sliceable_batch(runs)
    moved = [r for r in records if r.key == run_key("m0")]
    metrics = Metrics()
    ours = Applier(
        store, CollectingPublisher(), CODEC, metrics=metrics, partitions=4, slice_records=5
    )
    other = Applier(store, CollectingPublisher(), CODEC, metrics=Metrics(), partitions=4)
    await ours.apply(ns, moved[:3])  # cached at seq 3
    await other.apply(ns, moved[:4])  # stored at seq 4 behind our back
    await ours.apply(ns, records, ends)
    views = await store.load_many(runs)
    for run in runs:
        assert views[run] == fold(RunView(run_id=run), run_events(run, finished_at=50)).view
    assert metrics.write_conflicts >= 1  # the refold path was taken
    assert await store.read_progress(ns) == ends


async def test_write_fresh_stores_what_write_runs_and_update_indexes_store(
    store: ViewStore, clock: Clock
) -> None:
    """A rebuild's one-call write into a fresh namespace gives, key for key, what token-checked
    writes and index updates give: TTLs, parked events, open intents, and a run past retention
    stored nowhere."""
    clock.now = 10 * DAY
    parked_run = run_events("c")
    runs = {
        "a": run_events("a", finished_at=clock.now - 1000),
        "b": run_events("b", finished_at=clock.now - 2 * DAY),
        "c": [parked_run[0], parked_run[2]],
        "d": run_events("d"),
    }
    writes, updates = [], {}
    for run, events in runs.items():
        result = fold(RunView(run_id=run), events)
        view = result.view
        writes.append(
            RunWrite(
                run_id=run,
                expected=None,
                view=view,
                steps=set(view.steps),
                effects=set(view.effects),
                parked=result.parked,
                parked_changed=bool(result.parked),
            )
        )
        updates[run] = index_update(
            view, cold=True, status_before=view.status, effects=(), parked=bool(result.parked)
        )
    fresh, slow = await store.create_namespace(), await store.create_namespace()
    outcome = await store.write_fresh(fresh, writes, updates)
    assert outcome.expired == {"b"}
    assert not outcome.conflicts
    slow_outcome = await store.write_runs(slow, writes)
    await store.update_indexes(
        slow, [updates[w.run_id] for w in writes if w.run_id not in slow_outcome.expired]
    )
    snap = await store.snapshot(fresh)
    assert snap == await store.snapshot(slow)
    assert snap[key(fresh, "a", "run")][2]
    assert key(fresh, "c", "parked") in snap
    assert not any("b" in name.split(":") for name in snap)
    assert [i.idempotency_key for i in await _open_in(store, fresh)] == ["d:k0"]


async def _open_in(store: ViewStore, namespace: str) -> list[OpenIntent]:
    """The open intents of ``namespace`` (read through the live pointer)."""
    await store.swap(namespace)
    return await store.open_intents()


async def test_write_fresh_stored_stores_what_write_fresh_stores(
    store: ViewStore, clock: Clock
) -> None:
    """A rebuild's runs folded in plain data and written in their stored form give, key for key,
    what writing the model fold's views into a fresh namespace gives: TTLs, parked events, open
    intents, and a run past retention stored nowhere."""
    clock.now = 10 * DAY
    parked_run = run_events("c")
    runs = {
        "a": run_events("a", finished_at=clock.now - 1000),
        "b": run_events("b", finished_at=clock.now - 2 * DAY),
        "c": [parked_run[0], parked_run[2]],
        "d": run_events("d"),
    }
    codec = EventCodec()
    fold_of = PartitionFold(codec, BulkCounts())
    fold_of.add(
        [
            Record("t", 0, n, run_key(e.run_id), codec.encode(e))
            for n, e in enumerate(e for events in runs.values() for e in events)
        ]
    )
    fresh, views = await store.create_namespace(), await store.create_namespace()
    outcome = await store.write_fresh_stored(fresh, fold_of.fresh())
    assert outcome.expired == {"b"}
    writes, updates = fold_of.writes()
    await store.write_fresh(views, writes, updates)
    snap = await store.snapshot(fresh)
    assert snap == await store.snapshot(views)
    assert snap[key(fresh, "a", "run")][2]
    assert key(fresh, "c", "parked") in snap
    assert not any("b" in name.split(":") for name in snap)
    assert [i.idempotency_key for i in await _open_in(store, fresh)] == ["d:k0"]
