"""The pure fold of LangGraph checkpoint events into a run's steps (called by views.fold).

Each function changes the view in place and returns the step indexes it touched. Deleting
checkpoints keeps, in the deleted steps, only the blobs a surviving checkpoint still needs
(its channel versions and the versions their appended parts are based on).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from agentledger.events.models import CheckpointSaved, CheckpointsDeleted, WritesSaved
from agentledger.views.graph_model import GraphBlob, GraphCheckpoint, GraphWrite
from agentledger.views.model import RunView, StepView

BlobKey = tuple[str, str, str]  # (checkpoint ns, channel, version JSON text)


def version_text(version: object) -> str:
    """The JSON text a channel version is stored under (the same for every writer)."""
    return json.dumps(version)


def step_name(ns: str, checkpoint_id: str) -> str:
    """The name a checkpoint's step carries in views and listings."""
    return f"checkpoint {ns}/{checkpoint_id}" if ns else f"checkpoint {checkpoint_id}"


def checkpoint_problem(checkpoint_json: str) -> str | None:
    """Why the fold cannot keep a checkpoint's ``checkpoint_json`` (None when it can): every
    deletion reads the ``channel_versions`` of each surviving checkpoint (:func:`needed_blobs`),
    so it must be a JSON object whose ``channel_versions``, when there, is an object."""
    try:
        fields = json.loads(checkpoint_json)
    except ValueError as e:
        return f"checkpoint_json is not JSON ({e})"
    if not isinstance(fields, dict):
        return f"checkpoint_json is a JSON {type(fields).__name__}, not an object"
    if not isinstance(fields.get("channel_versions", {}), dict):
        return "checkpoint_json has channel_versions that are not an object"
    return None


def checkpoint_saved(view: RunView, ev: CheckpointSaved) -> set[int]:
    """Record the checkpoint as step ``ev.step``, checkpointed, with its blobs; the cursor
    (first step not checkpointed) moves past it."""
    blobs = [
        GraphBlob(channel=c, version=v, kind=k, base=b, type=t, value=x)
        for c, v, k, b, t, x in zip(
            ev.blob_channels,
            ev.blob_versions,
            ev.blob_kinds,
            ev.blob_bases,
            ev.blob_types,
            ev.blob_values,
            strict=True,
        )
    ]
    view.steps[ev.step] = StepView(
        step=ev.step,
        name=step_name(ev.checkpoint_ns, ev.checkpoint_id),
        status="checkpointed",
        attempt=1,
        attempts=1,
        result_json=ev.metadata_json,
        graph=GraphCheckpoint(
            ns=ev.checkpoint_ns,
            checkpoint_id=ev.checkpoint_id,
            parent_id=ev.parent_checkpoint_id,
            checkpoint_json=ev.checkpoint_json,
            metadata_json=ev.metadata_json,
            blobs=blobs,
        ),
    )
    # Checkpoints take the next free step, so the cursor moves one past it (O(1), not a scan).
    while (step := view.steps.get(view.cursor)) is not None and step.status == "checkpointed":
        view.cursor += 1
    return {ev.step}


def writes_saved(view: RunView, ev: WritesSaved) -> set[int]:
    """Add a task's writes to its checkpoint; a regular write (idx >= 0) already there stays,
    a special one (idx < 0: error, interrupt …) replaces the earlier one."""
    step = view.steps.get(ev.step)
    graph = step.graph if step is not None else None
    if graph is None or graph.deleted or graph.checkpoint_id != ev.checkpoint_id:
        return set()
    where = {(w.task_id, w.idx): i for i, w in enumerate(graph.writes)}
    for channel, idx, type_, value in zip(
        ev.write_channels, ev.write_indexes, ev.write_types, ev.write_values, strict=True
    ):
        write = GraphWrite(
            task_id=ev.task_id,
            task_path=ev.task_path,
            channel=channel,
            idx=idx,
            type=type_,
            value=value,
        )
        at = where.get((ev.task_id, idx))
        if at is None:
            where[(ev.task_id, idx)] = len(graph.writes)
            graph.writes.append(write)
        elif idx < 0:
            graph.writes[at] = write
    return {ev.step}


def checkpoints_deleted(view: RunView, ev: CheckpointsDeleted) -> set[int]:
    """Mark the listed checkpoints deleted: drop metadata, writes and every unneeded blob."""
    touched: set[int] = set()
    for index in ev.steps:
        step = view.steps.get(index)
        if step is None or step.graph is None:
            continue
        graph = step.graph
        graph.deleted = True
        graph.metadata_json = "{}"
        graph.checkpoint_json = "{}"
        graph.writes = []
        step.result_json = "null"
        touched.add(index)
    needed = needed_blobs(view.steps.values())
    for step in view.steps.values():
        held = step.graph
        if held is None or not held.deleted or not held.blobs:
            continue
        kept = [b for b in held.blobs if (held.ns, b.channel, b.version) in needed]
        if len(kept) != len(held.blobs):
            held.blobs = kept
            touched.add(step.step)
    return touched


def blob_index(steps: Iterable[StepView]) -> dict[BlobKey, GraphBlob]:
    """Every stored blob by (ns, channel, version); a later step's blob wins."""
    index: dict[BlobKey, GraphBlob] = {}
    for step in sorted(steps, key=lambda s: s.step):
        graph = step.graph
        if graph is None:
            continue
        for blob in graph.blobs:
            index[(graph.ns, blob.channel, blob.version)] = blob
    return index


def needed_blobs(steps: Iterable[StepView]) -> set[BlobKey]:
    """The blobs surviving checkpoints read: their versions and the bases of appended parts."""
    listed = list(steps)
    index = blob_index(listed)
    needed: set[BlobKey] = set()
    for step in listed:
        graph = step.graph
        if graph is None or graph.deleted:
            continue
        versions = json.loads(graph.checkpoint_json).get("channel_versions", {})
        for channel, version in versions.items():
            key: BlobKey | None = (graph.ns, channel, version_text(version))
            while key is not None and key not in needed:
                needed.add(key)
                blob = index.get(key)
                appends = blob is not None and blob.kind == "append"
                key = (key[0], key[1], blob.base) if blob is not None and appends else None
    return needed
