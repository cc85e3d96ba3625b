"""Named kill points in the SDK's real code path, inert unless armed (chaos tests and the demo).

The SDK calls :meth:`KillSwitch.reached` at each point below. An unarmed switch only counts. An
armed one SIGKILLs its own process on the ``hit``-th time its point is reached (``any`` counts
every point), so a crash lands exactly where the chaos test asked, with nothing flushed.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from typing import Literal

KillPoint = Literal[
    "step",  # a step attempt begins (nothing of it is durable yet)
    "mid_activity",  # an activity returned, its result is not recorded yet
    "after_provider_commit",  # the provider performed an effect, the outcome is not recorded
    "before_checkpoint",  # acceptance passed, the checkpoint is not written
    "after_checkpoint",  # the step's checkpoint is durable
    "checkpoint_pending",  # with_next_commit: the step returns, its checkpoint is only queued
    "resume_pending",  # a resume is ready, its RunResumed only queued for the first write
]
KILL_POINTS: tuple[str, ...] = (
    "step",
    "mid_activity",
    "after_provider_commit",
    "before_checkpoint",
    "after_checkpoint",
    "checkpoint_pending",
    "resume_pending",
)
ANY = "any"
#: Points reached only with ``checkpoints="with_next_commit"`` (a soak or demo of the default
#: mode never reaches them).
WITH_NEXT_COMMIT_ONLY: frozenset[str] = frozenset({"checkpoint_pending"})
#: Points reached only by a process that resumes a run (a first run never reaches them).
RESUME_ONLY: frozenset[str] = frozenset({"resume_pending"})


class KillSwitch:
    """Counts kill points reached; when armed, kills the process at the chosen hit."""

    def __init__(self, point: str | None = None, hit: int = 1) -> None:
        if point is not None and point not in (*KILL_POINTS, ANY):
            msg = f"kill point {point!r} is not one of {', '.join((*KILL_POINTS, ANY))}"
            raise ValueError(msg)
        if hit < 1:
            msg = f"kill hit is 1-based, got {hit}"
            raise ValueError(msg)
        self.point = point
        self.hit = hit
        self.counts: Counter[str] = Counter()

    @property
    def armed(self) -> bool:
        """True when this switch will kill at some point."""
        return self.point is not None

    def reached(self, point: KillPoint, run_id: str) -> None:
        """Called by the SDK at ``point``; kills the process if this is the chosen hit."""
        self.counts[point] += 1
        self.counts[ANY] += 1
        if self.point is not None and self.counts[self.point] == self.hit:
            self.fire(point, run_id)

    def fire(self, point: str, run_id: str) -> None:
        """Die now, as kill -9 would: no cleanup, no flush, no exit handlers."""
        del point, run_id
        os.kill(os.getpid(), signal.SIGKILL)
