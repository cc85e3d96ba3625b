"""Named kill points in the projector's commit path, inert unless armed (chaos tests only).

The projector calls :meth:`ProjectorKillSwitch.reached` at each point below. An unarmed switch
only counts. An armed one (``AGENTLEDGER_PROJECTOR_KILL_POINT``/``..._KILL_HIT``) SIGKILLs its
own process on the ``hit``-th time its point is reached, so the crash lands where exactly-once
is most at risk (DESIGN.md §16), with nothing flushed and no offset committed on the way out.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from typing import Literal

ProjectorKillPoint = Literal[
    "slice_committed",  # one slice's COMMIT replied; later slices of the batch may not have run
    "batch_committed",  # a batch's views and progress are in Redis, the group offsets lag
]
PROJECTOR_KILL_POINTS: tuple[str, ...] = ("slice_committed", "batch_committed")


def kill_point_problem(point: str | None, hit: int) -> str | None:
    """Why ``point``/``hit`` cannot arm a switch (naming the variable and the fix), or None."""
    if point is not None and point not in PROJECTOR_KILL_POINTS:
        return (
            f"AGENTLEDGER_PROJECTOR_KILL_POINT={point!r}: use one of "
            f"{', '.join(PROJECTOR_KILL_POINTS)} (or leave it unset)"
        )
    if hit < 1:
        return f"AGENTLEDGER_PROJECTOR_KILL_HIT={hit}: the hit is 1-based, use 1 or more"
    return None


class ProjectorKillSwitch:
    """Counts kill points reached; when armed, kills the process at the chosen hit."""

    def __init__(self, point: str | None = None, hit: int = 1) -> None:
        problem = kill_point_problem(point, hit)
        if problem is not None:
            raise ValueError(problem)
        self.point = point
        self.hit = hit
        self.counts: Counter[str] = Counter()

    @property
    def armed(self) -> bool:
        """True when this switch will kill at some point."""
        return self.point is not None

    def reached(self, point: ProjectorKillPoint) -> None:
        """Called by the projector at ``point``; kills the process if this is the chosen hit."""
        self.counts[point] += 1
        if point == self.point and self.counts[point] == self.hit:
            self.fire()

    def fire(self) -> None:
        """Die now, as kill -9 would: no cleanup, no flush, no offset commit, no exit handlers."""
        os.kill(os.getpid(), signal.SIGKILL)
