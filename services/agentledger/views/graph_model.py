"""How a LangGraph checkpoint looks inside a run's view: the ``graph`` part of its StepView.

A LangGraph thread is a run and each checkpoint it saved is a step of it (see
:mod:`agentledger.integrations.langgraph`). Values stay LangGraph-serialized (a type tag and
bytes); only the channels a checkpoint changed are stored with it, and a list that grew is
stored as the part appended to an earlier version, so a thread's view grows with what was
added, not with the number of checkpoints times the state.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class GraphBlob(BaseModel):
    """One channel at one version: its value, the items appended to ``base``, or nothing."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    channel: str
    version: str  # JSON text of the LangGraph channel version (int, float or str)
    kind: str  # full | append | empty
    base: str = ""  # JSON text of the version this one appends to (kind "append")
    type: str
    value: bytes = b""


class GraphWrite(BaseModel):
    """One pending write of a task against the checkpoint (LangGraph's ``put_writes``)."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    task_id: str
    task_path: str = ""
    channel: str
    idx: int
    type: str
    value: bytes


class GraphCheckpoint(BaseModel):
    """A LangGraph checkpoint without its channel values: ids, skeleton, metadata, blobs, writes.

    ``checkpoint_json`` holds the checkpoint's own fields except ``id`` and ``channel_values``
    (``v``, ``ts``, ``channel_versions``, ``versions_seen`` …). A deleted checkpoint keeps its
    ids and only the blobs a surviving checkpoint still reads.
    """

    ns: str = ""
    checkpoint_id: str
    parent_id: str | None = None
    checkpoint_json: str = "{}"
    metadata_json: str = "{}"
    blobs: list[GraphBlob] = Field(default_factory=list)
    writes: list[GraphWrite] = Field(default_factory=list)
    deleted: bool = False
