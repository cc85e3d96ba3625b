"""Deleting, pruning and copying LangGraph threads: each one CheckpointsDeleted or one batch of
re-saved checkpoints, written under the thread's lease like any other write."""

from __future__ import annotations

import json
from collections.abc import Sequence

from agentledger.events.models import WritesSaved
from agentledger.integrations.langgraph.reading import live_checkpoints
from agentledger.integrations.langgraph.runindex import RunIndex
from agentledger.integrations.langgraph.threads import Threads
from agentledger.integrations.langgraph.writing import copied_fields
from agentledger.views.graph_model import GraphBlob, GraphWrite
from agentledger.views.model import RunView

STRATEGIES = ("keep_latest", "delete")


async def _delete(threads: Threads, thread_id: str, steps: Sequence[int], reason: str) -> None:
    if not steps:
        return
    async with threads.using(thread_id) as session:
        alive = {step for step, _ in live_checkpoints(session.view)}
        session.delete([s for s in steps if s in alive], reason)
        await session.flush()


async def delete_thread(threads: Threads, thread_id: str) -> None:
    """Delete every checkpoint of the thread (a thread never written stays untouched)."""
    view = await threads.view(thread_id)
    await _delete(threads, thread_id, [s for s, _ in live_checkpoints(view)], "delete_thread")


async def delete_for_runs(threads: Threads, index: RunIndex, run_ids: Sequence[str]) -> None:
    """Delete the checkpoints whose metadata names one of ``run_ids``, in every thread."""
    wanted = set(run_ids)
    if not wanted:
        return
    candidates = set(threads.held())
    for run_id in sorted(wanted):
        candidates |= await index.threads(run_id)
    for thread_id in sorted(candidates):
        view = await threads.view(thread_id)
        steps = [
            s
            for s, g in live_checkpoints(view)
            if json.loads(g.metadata_json).get("run_id") in wanted
        ]
        await _delete(threads, thread_id, steps, "delete_for_runs")
    for run_id in sorted(wanted):
        await index.forget(run_id)


async def prune(threads: Threads, thread_ids: Sequence[str], strategy: str) -> None:
    """``keep_latest``: keep each namespace's newest checkpoint; ``delete``: keep none."""
    if strategy not in STRATEGIES:
        msg = f"unknown prune strategy {strategy!r}; use one of {', '.join(STRATEGIES)}"
        raise ValueError(msg)
    for thread_id in thread_ids:
        live = live_checkpoints(await threads.view(thread_id))
        keep: set[int] = set()
        if strategy == "keep_latest":
            newest: dict[str, tuple[str, int]] = {}
            for step, graph in live:
                if graph.ns not in newest or graph.checkpoint_id > newest[graph.ns][0]:
                    newest[graph.ns] = (graph.checkpoint_id, step)
            keep = {step for _, step in newest.values()}
        await _delete(threads, thread_id, [s for s, _ in live if s not in keep], "prune")


def _orphan_blobs(view: RunView) -> dict[str, list[GraphBlob]]:
    """Blobs kept in deleted checkpoints because live ones still read them, by namespace."""
    found: dict[str, list[GraphBlob]] = {}
    for index in sorted(view.steps):
        graph = view.steps[index].graph
        if graph is not None and graph.deleted and graph.blobs:
            found.setdefault(graph.ns, []).extend(graph.blobs)
    return found


def _groups(writes: Sequence[GraphWrite]) -> dict[tuple[str, str], list[GraphWrite]]:
    grouped: dict[tuple[str, str], list[GraphWrite]] = {}
    for write in writes:
        grouped.setdefault((write.task_id, write.task_path), []).append(write)
    return grouped


async def copy_thread(threads: Threads, source: str, target: str) -> list[str]:
    """Re-save every live checkpoint of ``source`` (and its writes) in ``target``, in order,
    in one commit; return the copied metadata (JSON texts)."""
    view = await threads.view(source)
    live = live_checkpoints(view)
    if not live:
        return []
    orphans = _orphan_blobs(view)
    copied: list[str] = []
    async with threads.using(target) as session:
        for _, graph in live:
            fields = copied_fields(graph)
            extra = orphans.pop(graph.ns, [])
            if extra:
                for name, attr in (
                    ("blob_channels", "channel"),
                    ("blob_versions", "version"),
                    ("blob_kinds", "kind"),
                    ("blob_bases", "base"),
                    ("blob_types", "type"),
                    ("blob_values", "value"),
                ):
                    fields[name] = [getattr(b, attr) for b in extra] + fields[name]
            step = session.append_checkpoint(fields)
            for (task_id, task_path), writes in _groups(graph.writes).items():
                session.append(
                    WritesSaved,
                    step=step,
                    checkpoint_ns=graph.ns,
                    checkpoint_id=graph.checkpoint_id,
                    task_id=task_id,
                    task_path=task_path,
                    write_channels=[w.channel for w in writes],
                    write_indexes=[w.idx for w in writes],
                    write_types=[w.type for w in writes],
                    write_values=[w.value for w in writes],
                )
            copied.append(graph.metadata_json)
        session.last.clear()
        await session.flush()
    return copied
