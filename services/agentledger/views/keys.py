"""Redis key names of the views: ``<prefix>:<namespace>:{RUN}:run`` and friends (DESIGN.md §6).

Every key of one run carries the run's hash tag, so one script updates a run atomically on Redis
Cluster too. A namespace segment lets ``views rebuild`` build a complete copy next to the live
one; the pointer key ``<prefix>:live`` names the namespace readers and the projector use.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

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
        """The keys of one namespace."""
        return SpaceKeys(f"{self.prefix}:{namespace}")


@dataclass(frozen=True)
class SpaceKeys:
    """Key names inside one namespace; ``relative`` strips the namespace for comparisons."""

    base: str

    def run(self, run_id: str, part: str = "run") -> str:
        """One part (run, steps, effects, parked) of a run."""
        return f"{self.base}:{{{run_tag(run_id)}}}:{part}"

    def run_keys(self, run_id: str) -> list[str]:
        """All keys of a run, in :data:`RUN_PARTS` order."""
        return [self.run(run_id, part) for part in RUN_PARTS]

    def status_index(self, status: str) -> str:
        """Sorted set of run ids in ``status``, scored by the run's last event time."""
        return f"{self.base}:idx:{INDEX_TAG}:status:{status}"

    @property
    def intents_index(self) -> str:
        """Sorted set of open intents (member = JSON [run, key]), scored by intended_at."""
        return f"{self.base}:idx:{INDEX_TAG}:intents"

    @property
    def parked_index(self) -> str:
        """Sorted set of runs with parked events, scored by when the projector first parked."""
        return f"{self.base}:idx:{INDEX_TAG}:parked"

    @property
    def progress(self) -> str:
        """Hash ``topic:partition`` -> next offset applied up to (in the index slot, so one
        script raises it together with a batch's index entries)."""
        return f"{self.base}:idx:{INDEX_TAG}:progress"

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
