"""The pure fold of LangGraph checkpoint events: steps, writes, deletions that keep what is read."""

from __future__ import annotations

import json
from typing import Any

from agentledger.events import CheckpointSaved, CheckpointsDeleted, RunEvent, WritesSaved
from agentledger.integrations.langgraph.values import appended
from agentledger.views import RunView, fold
from agentledger.views.graph_fold import needed_blobs

RUN = "lg.t"
ENV: dict[str, Any] = {"run_id": RUN, "fence": 1, "worker_id": "w"}


def saved(seq: int, step: int, cid: str, versions: dict[str, int], blobs: list[Any]) -> RunEvent:
    """A CheckpointSaved whose blobs are (channel, version, kind, base) tuples."""
    return CheckpointSaved(
        **ENV,
        seq=seq,
        step=step,
        checkpoint_id=cid,
        checkpoint_json=json.dumps({"v": 4, "channel_versions": versions}),
        blob_channels=[b[0] for b in blobs],
        blob_versions=[json.dumps(b[1]) for b in blobs],
        blob_kinds=[b[2] for b in blobs],
        blob_bases=[json.dumps(b[3]) if b[3] is not None else "" for b in blobs],
        blob_types=["msgpack" for _ in blobs],
        blob_values=[f"{b[0]}@{b[1]}".encode() for b in blobs],
    )


def writes(seq: int, step: int, cid: str, task: str, items: list[tuple[str, int, bytes]]) -> Any:
    """A WritesSaved of ``task`` with (channel, idx, value) items."""
    return WritesSaved(
        **ENV,
        seq=seq,
        step=step,
        checkpoint_id=cid,
        task_id=task,
        write_channels=[i[0] for i in items],
        write_indexes=[i[1] for i in items],
        write_types=["msgpack" for _ in items],
        write_values=[i[2] for i in items],
    )


def chain() -> list[RunEvent]:
    """Three checkpoints: m full at v1, appended at v2 and v3; k full at v1 only."""
    return [
        saved(1, 0, "c1", {"m": 1, "k": 1}, [("m", 1, "full", None), ("k", 1, "full", None)]),
        saved(2, 1, "c2", {"m": 2, "k": 1}, [("m", 2, "append", 1)]),
        saved(3, 2, "c3", {"m": 3, "k": 1}, [("m", 3, "append", 2)]),
    ]


def test_checkpoints_are_checkpointed_steps_and_move_the_cursor() -> None:
    """Each CheckpointSaved is a checkpointed step carrying its graph part."""
    view = fold(RunView(run_id=RUN), chain()).view
    assert sorted(view.steps) == [0, 1, 2]
    assert view.cursor == 3
    assert [s.graph.checkpoint_id for s in view.steps.values() if s.graph] == ["c1", "c2", "c3"]


def test_deleting_older_checkpoints_keeps_the_blobs_the_newest_still_reads() -> None:
    """Pruning c1 and c2 keeps m@1, m@2 (bases of m@3) and k@1; their metadata and writes go."""
    events = [
        *chain(),
        writes(4, 0, "c1", "t1", [("m", 0, b"w")]),
        CheckpointsDeleted(**ENV, seq=5, steps=[0, 1], reason="prune"),
    ]
    view = fold(RunView(run_id=RUN), events).view
    first, second = view.steps[0].graph, view.steps[1].graph
    assert first is not None
    assert second is not None
    assert first.deleted
    assert second.deleted
    assert first.writes == []
    assert {(b.channel, b.version) for b in first.blobs} == {("m", "1"), ("k", "1")}
    assert {(b.channel, b.version) for b in second.blobs} == {("m", "2")}
    assert needed_blobs(view.steps.values()) == {("", "m", "1"), ("", "m", "2"), ("", "m", "3"),
                                                 ("", "k", "1")}  # fmt: skip


def test_deleting_every_checkpoint_drops_every_blob() -> None:
    """delete_thread leaves no value behind in the views."""
    events = [*chain(), CheckpointsDeleted(**ENV, seq=4, steps=[0, 1, 2], reason="delete_thread")]
    view = fold(RunView(run_id=RUN), events).view
    assert all(s.graph is not None and s.graph.blobs == [] for s in view.steps.values())


def test_regular_writes_are_kept_once_and_special_ones_replaced() -> None:
    """A repeated (task, idx >= 0) write is ignored; an error write (idx < 0) is replaced."""
    events = [
        *chain()[:1],
        writes(2, 0, "c1", "t1", [("a", 0, b"first"), ("__error__", -1, b"e1")]),
        writes(3, 0, "c1", "t1", [("a", 0, b"again"), ("__error__", -1, b"e2")]),
        writes(4, 0, "c1", "t2", [("a", 0, b"other task")]),
    ]
    graph = fold(RunView(run_id=RUN), events).view.steps[0].graph
    assert graph is not None
    assert [(w.task_id, w.channel, w.value) for w in graph.writes] == [
        ("t1", "a", b"first"),
        ("t1", "__error__", b"e2"),
        ("t2", "a", b"other task"),
    ]


def test_writes_for_another_checkpoint_id_at_that_step_are_ignored() -> None:
    """A write naming a checkpoint the step does not hold changes nothing."""
    events = [*chain()[:1], writes(2, 0, "elsewhere", "t1", [("a", 0, b"x")])]
    result = fold(RunView(run_id=RUN), events)
    graph = result.view.steps[0].graph
    assert graph is not None
    assert graph.writes == []


def test_the_fold_is_the_same_whatever_the_redeliveries() -> None:
    """Folding the events twice over (duplicates) gives the view of folding them once."""
    events = [*chain(), CheckpointsDeleted(**ENV, seq=4, steps=[0], reason="prune")]
    once = fold(RunView(run_id=RUN), events).view
    twice = fold(RunView(run_id=RUN), events + list(reversed(events))).view
    assert twice == once


def test_appended_finds_the_tail_only_of_a_list_that_grew() -> None:
    """A list that extends the previous one gives its tail; anything else gives None."""
    old = [1, 2]
    assert appended(old, [1, 2, 3]) == [3]
    assert appended(old, [1, 2]) == []
    assert appended(old, [1, 9, 3]) is None
    assert appended(old, [1]) is None
    assert appended(old, (1, 2, 3)) is None
    assert appended(None, [1]) is None
