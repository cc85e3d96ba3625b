"""Turning LangGraph's ``put`` and ``put_writes`` arguments into event fields (no I/O).

Only the channels in ``new_versions`` are stored with a checkpoint. A list channel whose new
value is the value last stored for it plus more items is stored as those items and the version
they extend (``append``); anything else is stored whole (``full``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from agentledger.errors import PayloadError
from agentledger.integrations.langgraph.values import EMPTY, ValueCodec, appended
from agentledger.views.graph_fold import version_text
from agentledger.views.graph_model import GraphCheckpoint

_SKELETON_SKIP = frozenset({"id", "channel_values"})


@dataclass
class LastValues:
    """The last stored list of each (ns, channel) of one thread, to store the next as a delta.

    Filled by what the saver writes and by what it reads back; emptied when checkpoints are
    deleted (a delta must never point at a version that may be gone).
    """

    lists: dict[tuple[str, str], tuple[str, list[Any]]] = field(default_factory=dict)

    def remember(self, ns: str, channel: str, version: str, value: object) -> None:
        """Keep a shallow copy of ``value`` if it is a plain list; forget the channel if not."""
        if type(value) is list:
            self.lists[(ns, channel)] = (version, list(value))
        else:
            self.lists.pop((ns, channel), None)

    def clear(self) -> None:
        """Forget everything."""
        self.lists.clear()


def _json(value: object, what: str) -> str:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        msg = f"the checkpoint's {what} cannot be recorded as JSON: {e}"
        raise PayloadError(msg) from e


def metadata_json(codec: ValueCodec, config: RunnableConfig, metadata: CheckpointMetadata) -> str:
    """The checkpoint's metadata (with LangGraph's config-derived keys), redacted, as JSON."""
    merged = get_checkpoint_metadata(config, metadata)
    plain = json.loads(json.dumps(merged, default=str))
    return _json(codec.redactor.json(plain), "metadata")


def checkpoint_fields(
    codec: ValueCodec,
    last: LastValues,
    *,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> dict[str, Any]:
    """The fields of a CheckpointSaved (all but the envelope and ``step``)."""
    conf = config["configurable"]
    ns: str = conf.get("checkpoint_ns", "")
    values: Mapping[str, Any] = checkpoint["channel_values"]
    skeleton = {k: v for k, v in checkpoint.items() if k not in _SKELETON_SKIP}
    blobs: dict[str, list[Any]] = {
        "blob_channels": [],
        "blob_versions": [],
        "blob_kinds": [],
        "blob_bases": [],
        "blob_types": [],
        "blob_values": [],
    }
    for channel, version in new_versions.items():
        text = version_text(version)
        kind, base, type_, data = EMPTY, "", EMPTY, b""
        if channel in values:
            value = values[channel]
            prior = last.lists.get((ns, channel))
            tail = appended(prior[1], value) if prior is not None and prior[0] != text else None
            if tail is not None and prior is not None:
                kind, base = "append", prior[0]
                type_, data = codec.dumps(tail)
            else:
                kind = "full"
                type_, data = codec.dumps(value)
            last.remember(ns, channel, text, value)
        else:
            last.lists.pop((ns, channel), None)
        for name, item in zip(blobs, (channel, text, kind, base, type_, data), strict=True):
            blobs[name].append(item)
    return {
        "checkpoint_ns": ns,
        "checkpoint_id": checkpoint["id"],
        "parent_checkpoint_id": conf.get("checkpoint_id"),
        "checkpoint_json": _json(skeleton, "fields"),
        "metadata_json": metadata_json(codec, config, metadata),
        **blobs,
    }


def write_fields(
    codec: ValueCodec,
    graph: GraphCheckpoint,
    writes: Sequence[tuple[str, Any]],
    task_id: str,
    task_path: str,
) -> dict[str, Any] | None:
    """The fields of a WritesSaved (all but the envelope and ``step``), or None if every write
    is already recorded (a regular write is kept once per task and index, as LangGraph asks)."""
    have = {(w.task_id, w.idx) for w in graph.writes}
    channels: list[str] = []
    indexes: list[int] = []
    types: list[str] = []
    datas: list[bytes] = []
    for position, (channel, value) in enumerate(writes):
        idx = WRITES_IDX_MAP.get(channel, position)
        if idx >= 0 and (task_id, idx) in have:
            continue
        type_, data = codec.dumps(value)
        channels.append(channel)
        indexes.append(idx)
        types.append(type_)
        datas.append(data)
    if not channels:
        return None
    return {
        "checkpoint_ns": graph.ns,
        "checkpoint_id": graph.checkpoint_id,
        "task_id": task_id,
        "task_path": task_path,
        "write_channels": channels,
        "write_indexes": indexes,
        "write_types": types,
        "write_values": datas,
    }


def copied_fields(graph: GraphCheckpoint) -> dict[str, Any]:
    """CheckpointSaved fields that re-save ``graph`` as it is stored (copy_thread)."""
    return {
        "checkpoint_ns": graph.ns,
        "checkpoint_id": graph.checkpoint_id,
        "parent_checkpoint_id": graph.parent_id,
        "checkpoint_json": graph.checkpoint_json,
        "metadata_json": graph.metadata_json,
        "blob_channels": [b.channel for b in graph.blobs],
        "blob_versions": [b.version for b in graph.blobs],
        "blob_kinds": [b.kind for b in graph.blobs],
        "blob_bases": [b.base for b in graph.blobs],
        "blob_types": [b.type for b in graph.blobs],
        "blob_values": [b.value for b in graph.blobs],
    }
