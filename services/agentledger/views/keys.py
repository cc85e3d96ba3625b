"""Redis key names of the views: ``<prefix>:<namespace>:{RUN}:run`` and friends (DESIGN.md §6).

Two layouts, told apart by the namespace's name. A plain namespace (``v1a2b3c4``, single Redis)
tags each run's keys with the run (``{RUN}``) and every index and the progress with ``{idx}``.
A namespace sharded over the run topics' P partitions (``v1a2b3c4.p4``, Redis Cluster) puts
everything of partition p — the views of the runs whose events are on p, their index entries,
and the progress of p in every run topic — under the one hash tag ``{p<p>}``: one script per
partition then writes views, indexes and progress atomically (DESIGN.md §14). A namespace
segment lets ``views rebuild`` build a complete copy next to the live one; the pointer key
``<prefix>:live`` names the namespace readers and the projector use.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from agentledger.events.keying import partition_for, run_key

#: The parts of a run, each one key: the run hash, steps, effects, and events parked ahead of a gap.
RUN_PARTS: tuple[str, ...] = ("run", "steps", "effects", "parked")
#: Every status a run can be indexed under (``new`` = only parked events seen so far).
STATUSES: tuple[str, ...] = (
    "new",
    "running",
    "paused",
    "succeeded",
    "failed",
    "rejected",
    "budget_exceeded",
    "cancelled",
)
INDEX_TAG = "{idx}"


def run_tag(run_id: str) -> str:
    """The hash tag of a run: its id, or a digest of it when the id itself contains braces."""
    if "{" in run_id or "}" in run_id or not run_id:
        return "h" + hashlib.sha1(run_id.encode()).hexdigest()[:20]  # noqa: S324 - not security
    return run_id


@dataclass(frozen=True)
class Keys:
    """Key names under one prefix; per-namespace names come from :meth:`space`."""

    prefix: str

    @property
    def pointer(self) -> str:
        """The string key naming the live namespace."""
        return f"{self.prefix}:live"

    @property
    def registry(self) -> str:
        """Sorted set of every namespace ever created (member = id, score = creation ms)."""
        return f"{self.prefix}:namespaces"

    def space(self, namespace: str) -> SpaceKeys:
        """The keys of one namespace (its layout read from its name)."""
        return SpaceKeys(f"{self.prefix}:{namespace}", partitions_of(namespace))


_SHARDED = re.compile(r"\.p([1-9][0-9]{0,3})$")


def partitions_of(namespace: str) -> int | None:
    """The partition count a namespace is sharded over (``….p4`` -> 4), None for plain ones."""
    match = _SHARDED.search(namespace)
    return None if match is None else int(match.group(1))


def sharded_name(namespace: str, partitions: int) -> str:
    """The name of ``namespace`` sharded over ``partitions`` run-topic partitions."""
    return f"{namespace}.p{partitions}"


#: A slot group: None for the single group of a plain namespace, else a partition number.
Group = int | None


@dataclass(frozen=True)
class SpaceKeys:
    """Key names inside one namespace; ``relative`` strips the namespace for comparisons.

    ``partitions`` None is the plain layout (one group, ``None``); otherwise group p holds
    partition p's runs, indexes and progress under hash tag ``{p<p>}``.
    """

    base: str
    partitions: int | None = None

    @property
    def groups(self) -> list[Group]:
        """Every slot group of the namespace."""
        return [None] if self.partitions is None else list(range(self.partitions))

    def group_of(self, run_id: str) -> Group:
        """The group of a run: the partition its events are on (None when plain)."""
        if self.partitions is None:
            return None
        return partition_for(run_key(run_id), self.partitions)

    def group_of_partition(self, partition: int) -> Group:
        """The group holding the progress of run-topic ``partition``."""
        if self.partitions is None:
            return None
        if not 0 <= partition < self.partitions:
            msg = f"partition {partition} is outside the {self.partitions} of {self.base}"
            raise ValueError(msg)
        return partition

    def _index(self, group: Group, name: str) -> str:
        if self.partitions is None:
            return f"{self.base}:idx:{INDEX_TAG}:{name}"
        if group is None:
            msg = f"{self.base} is sharded: name the group of index {name}"
            raise ValueError(msg)
        return f"{self.base}:{{p{group}}}:idx:{name}"

    def run(self, run_id: str, part: str = "run") -> str:
        """One part (run, steps, effects, parked) of a run."""
        if self.partitions is None:
            return f"{self.base}:{{{run_tag(run_id)}}}:{part}"
        return f"{self.base}:{{p{self.group_of(run_id)}}}:r:{run_tag(run_id)}:{part}"

    def run_keys(self, run_id: str) -> list[str]:
        """All keys of a run, in :data:`RUN_PARTS` order."""
        return [self.run(run_id, part) for part in RUN_PARTS]

    def status_index(self, status: str, group: Group = None) -> str:
        """Sorted set of run ids in ``status``, scored by the run's last event time."""
        return self._index(group, f"status:{status}")

    def intents_index(self, group: Group = None) -> str:
        """Sorted set of open intents (member = JSON [run, key]), scored by intended_at."""
        return self._index(group, "intents")

    def parked_index(self, group: Group = None) -> str:
        """Sorted set of runs with parked events, scored by when the projector first parked."""
        return self._index(group, "parked")

    def progress(self, group: Group = None) -> str:
        """Hash ``topic:partition`` -> next offset applied up to, in the group's slot (so one
        script raises it together with the group's views and index entries)."""
        return self._index(group, "progress")

    def is_progress(self, key: str) -> bool:
        """Whether ``key`` is a progress hash of this namespace."""
        return key in {self.progress(g) for g in self.groups}

    def is_parked_index(self, key: str) -> bool:
        """Whether ``key`` is a parked index of this namespace."""
        return key in {self.parked_index(g) for g in self.groups}

    @property
    def pattern(self) -> str:
        """SCAN pattern matching every key of the namespace."""
        return f"{self.base}:*"

    @property
    def run_pattern(self) -> str:
        """SCAN pattern matching the run hash of every run."""
        return f"{self.base}:{{*}}:run"

    def relative(self, key: str) -> str:
        """``key`` without the namespace prefix (keys of two namespaces compare equal)."""
        return key.removeprefix(self.base + ":")


#: The progress hash field every namespace is born with: when it is gone, so are the views.
BORN_FIELD = "_born"


def progress_field(topic: str, partition: int) -> str:
    """The progress hash field of a topic-partition (Kafka topic names never contain ':')."""
    return f"{topic}:{partition}"


def parse_progress_field(field: str) -> tuple[str, int]:
    """Inverse of :func:`progress_field`."""
    topic, _, partition = field.rpartition(":")
    return topic, int(partition)
