"""Reading LangGraph checkpoints out of a run's view: find, filter, and rebuild channel values.

A checkpoint's channel values are rebuilt from the blobs of the versions it names: a full value,
or a chain of appended parts back to one (each blob is decoded once per read, however many
checkpoints of the listing share it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple, writes_sort_key

from agentledger.errors import GraphStateError
from agentledger.integrations.langgraph.values import EMPTY, ValueCodec
from agentledger.views.graph_fold import BlobKey, blob_index, version_text
from agentledger.views.graph_model import GraphBlob, GraphCheckpoint
from agentledger.views.model import RunView

_MISSING = object()


def checkpoint_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config LangGraph identifies a saved checkpoint by."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def live_checkpoints(view: RunView) -> list[tuple[int, GraphCheckpoint]]:
    """(step, checkpoint) of every checkpoint not deleted, in step order; a re-saved id keeps
    only its latest step."""
    latest: dict[tuple[str, str], tuple[int, GraphCheckpoint]] = {}
    for index in sorted(view.steps):
        graph = view.steps[index].graph
        if graph is not None and not graph.deleted:
            latest[(graph.ns, graph.checkpoint_id)] = (index, graph)
    return sorted(latest.values(), key=lambda item: item[0])


class ThreadReader:
    """The checkpoints of one thread as LangGraph sees them, read from a view."""

    def __init__(self, thread_id: str, view: RunView, codec: ValueCodec) -> None:
        self.thread_id = thread_id
        self.run_id = view.run_id
        self._codec = codec
        self._live = live_checkpoints(view)
        self._blobs: dict[BlobKey, GraphBlob] = blob_index(view.steps.values())
        self._memo: dict[BlobKey, Any] = {}

    @property
    def checkpoints(self) -> list[tuple[int, GraphCheckpoint]]:
        """(step, checkpoint) of every live checkpoint, in the order they were saved."""
        return list(self._live)

    def get(self, ns: str, checkpoint_id: str | None) -> GraphCheckpoint | None:
        """The checkpoint ``checkpoint_id`` of ``ns``, or the newest one when it is None."""
        found = [g for _, g in self._live if g.ns == ns]
        if checkpoint_id is None:
            return max(found, key=lambda g: g.checkpoint_id, default=None)
        return next((g for g in found if g.checkpoint_id == checkpoint_id), None)

    def select(
        self,
        *,
        ns: str | None,
        checkpoint_id: str | None,
        before: str | None,
        filter: Mapping[str, Any] | None,
        limit: int | None,
    ) -> list[GraphCheckpoint]:
        """Checkpoints matching LangGraph's ``list`` arguments, newest id first."""
        chosen: list[GraphCheckpoint] = []
        for _, graph in sorted(self._live, key=lambda item: item[1].checkpoint_id, reverse=True):
            if ns is not None and graph.ns != ns:
                continue
            if checkpoint_id and graph.checkpoint_id != checkpoint_id:
                continue
            if before and graph.checkpoint_id >= before:
                continue
            if filter:
                metadata = json.loads(graph.metadata_json)
                if any(metadata.get(k) != v for k, v in filter.items()):
                    continue
            if limit is not None and len(chosen) >= limit:
                break
            chosen.append(graph)
        return chosen

    def to_tuple(self, graph: GraphCheckpoint) -> CheckpointTuple:
        """The CheckpointTuple of ``graph``: values rebuilt, writes in LangGraph's order."""
        skeleton = json.loads(graph.checkpoint_json)
        checkpoint: Any = {
            **skeleton,
            "id": graph.checkpoint_id,
            "channel_values": self.values(graph),
        }
        writes = sorted(graph.writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
        return CheckpointTuple(
            config=checkpoint_config(self.thread_id, graph.ns, graph.checkpoint_id),
            checkpoint=checkpoint,
            metadata=json.loads(graph.metadata_json),
            parent_config=(
                checkpoint_config(self.thread_id, graph.ns, graph.parent_id)
                if graph.parent_id
                else None
            ),
            pending_writes=[
                (w.task_id, w.channel, self._codec.loads(w.type, w.value)) for w in writes
            ],
        )

    def values(self, graph: GraphCheckpoint) -> dict[str, Any]:
        """Channel name -> value at the versions ``graph`` names (channels without one left out)."""
        versions = json.loads(graph.checkpoint_json).get("channel_versions", {})
        values: dict[str, Any] = {}
        for channel, version in versions.items():
            value = self.value_at(graph.ns, channel, version_text(version))
            if value is not _MISSING:
                values[channel] = list(value) if type(value) is list else value
        return values

    def value_at(self, ns: str, channel: str, version: str) -> Any:
        """The value of ``channel`` at ``version`` (JSON text), or a sentinel when none is kept."""
        key: BlobKey = (ns, channel, version)
        chain: list[tuple[BlobKey, GraphBlob]] = []
        while key not in self._memo:
            blob = self._blobs.get(key)
            if blob is None:
                if chain:
                    raise self._broken(chain[-1][1], "the version it appends to is not stored")
                return _MISSING
            if blob.kind != "append":
                base = _MISSING if blob.kind == EMPTY else self._codec.loads(blob.type, blob.value)
                if chain and type(base) is not list:
                    raise self._broken(chain[-1][1], "the value it appends to is not a list")
                self._memo[key] = base
                break
            chain.append((key, blob))
            key = (ns, channel, blob.base)
        value = self._memo[key]
        for at, blob in reversed(chain):
            value = [*value, *self._codec.loads(blob.type, blob.value)]
            self._memo[at] = value
        return value

    def _broken(self, blob: GraphBlob, why: str) -> GraphStateError:
        msg = (
            f"channel {blob.channel!r} version {blob.version} is stored as an appended part, "
            f"but {why} (base version {blob.base})"
        )
        return GraphStateError(msg, run_id=self.run_id)
