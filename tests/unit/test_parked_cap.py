"""The parked hash is bounded per run: events over the cap are dropped, then re-read."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agentledger.cli import run
from agentledger.projector.bulk import bulk_replay
from agentledger.projector.parking import DEFAULT_PARKED_MAX, bounded_parked, needs_reread
from agentledger.projector.rebuild import compare
from agentledger.projector.runner import Projector
from agentledger.projector.settings import ProjectorSettings
from agentledger.views import RunView
from tests.unit.test_fold_into_store import CODEC, PARTS, World, expected, live, run_events

CAP = 4


def projector(world: World, cap: int = CAP) -> Projector:
    """A projector over the world's log and store whose runs park at most ``cap`` events."""
    return world.projector(parked_max=cap)


async def parked_of(world: World, run: str) -> tuple[list[int], int]:
    """The stored run's parked seqs and its drop mark."""
    stored = (await world.store.load_runs(await live(world), [run]))[run]
    return sorted(e.seq for e in stored.parked), stored.dropped_from


def test_bounded_parked_keeps_the_lowest_seqs_and_marks_the_lowest_dropped() -> None:
    """Over the cap the highest seqs go, and the mark only ever moves down to a dropped seq."""
    events = run_events("r1", steps=2)[2:]  # seqs 3..12, all ahead of a gap at 2
    kept, mark = bounded_parked(list(reversed(events)), 3)
    assert [e.seq for e in kept] == [3, 4, 5]
    assert mark == 6
    kept, mark = bounded_parked(events[:5], 3, 5)  # seqs 3..7, mark 5 from earlier
    assert [e.seq for e in kept] == [3, 4]
    assert mark == 5
    assert bounded_parked(events[:2], 3) == (events[:2], 0)
    view = RunView(run_id="r1", applied_seq=4)
    assert needs_reread(view, 5)
    assert not needs_reread(view, 6)
    assert not needs_reread(view, 0)


async def test_parked_hash_never_exceeds_the_cap_and_the_run_ends_as_the_log_says() -> None:
    """A run whose first event comes last parks at most the cap, drops the rest with a mark, and
    once the gap fills is re-read from the log: the view, index and keys equal a rebuild's."""
    world = World()
    events = run_events("r1", steps=4)  # 22 events
    recs = world.write([*events[1:], events[0]])
    proj = projector(world)
    for rec in recs[:-1]:
        await proj.process([rec])
        parked, _ = await parked_of(world, "r1")
        assert len(parked) <= CAP
    assert await parked_of(world, "r1") == ([2, 3, 4, 5], 6)
    assert await world.store.load("r1") == RunView(run_id="r1")  # nothing applied yet
    await proj.process(recs[-1:])
    assert await world.store.load("r1") == expected(events)
    assert await parked_of(world, "r1") == ([], 0)
    ns = await live(world)
    assert await world.store.overdue_parked(ns, 2**50) == []
    scratch = await world.store.create_namespace()
    await bulk_replay(
        world.store,
        world.log,
        scratch,
        {tp: (0, end) for tp, end in proj.positions.items()},
        chunk=7,
        codec=CODEC,
        partitions=PARTS,
        parked_max=CAP,
    )
    result = compare(await world.store.snapshot(ns), await world.store.snapshot(scratch))
    assert result.differences == []
    assert result.moved_on == []


async def test_a_due_reread_lost_in_a_crash_is_done_by_the_next_projectors_tick() -> None:
    """A projector that dies between the write that made a run due for a re-read and the re-read
    leaves the run marked (and in the parked index); a fresh projector's tick completes it."""
    world = World(gap_alert_ms=0)
    events = run_events("r1", steps=2)  # 12 events
    recs = world.write([*events[1:], events[0]])
    dying = projector(world)
    for rec in recs[:-1]:
        await dying.process([rec])
    original = world.log.read

    def broken(ranges: object, chunk: int) -> object:
        raise ConnectionError("the process died here")

    world.log.read = broken  # type: ignore[assignment,method-assign]
    with pytest.raises(ConnectionError):
        await dying.process(recs[-1:])
    world.log.read = original  # type: ignore[method-assign]
    assert await parked_of(world, "r1") == ([], 6)
    assert (await world.store.load("r1")) == expected(events[:5])
    await projector(world).tick()
    assert await world.store.load("r1") == expected(events)
    assert await parked_of(world, "r1") == ([], 0)
    assert world.alerts() == []  # a run due for a re-read is no gap


def test_a_parked_cap_below_one_stops_the_projector_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """AGENTLEDGER_PROJECTOR_PARKED_MAX=0 is refused at start, in one line naming the variable."""
    monkeypatch.setenv("AGENTLEDGER_STATE_DIR", str(tmp_path))
    assert ProjectorSettings().projector_parked_max == DEFAULT_PARKED_MAX
    monkeypatch.setenv("AGENTLEDGER_PROJECTOR_PARKED_MAX", "0")
    assert run(["projector"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "AGENTLEDGER_PROJECTOR_PARKED_MAX" in lines[0]
    with pytest.raises(ValidationError, match="projector_parked_max"):
        ProjectorSettings(projector_parked_max=0)


async def test_a_real_gap_behind_dropped_events_is_alerted_naming_the_drop() -> None:
    """A run that dropped events over the cap and still misses an earlier seq (no re-read can
    help yet) raises one projector.gap alert saying where the dropped events start."""
    world = World(gap_alert_ms=0)
    events = run_events("r1", steps=2)  # 12 events; seq 1 never comes
    proj = projector(world)
    for rec in world.write(events[1:]):
        await proj.process([rec])
    assert await parked_of(world, "r1") == ([2, 3, 4, 5], 6)
    await proj.tick()
    await proj.tick()
    (alert,) = world.alerts()
    assert alert.code == "projector.gap"
    assert "seq 1 has been missing" in alert.summary
    assert "events from seq 6 on were over the parked cap" in alert.summary
