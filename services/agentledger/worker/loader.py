"""Loading a run's resume view: the projector's view once it has caught up, else the log's fold.

The resume barrier: the view in Redis is used only when the projector has applied everything up
to the end offsets of the run's partitions (read after the previous writer's last commit), so a
resumed writer never continues from a view that misses a committed event. If the projector is
absent, behind, or wiped (FLUSHALL), the SDK folds the run's events from Kafka itself with the
same pure fold.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Literal

from agentledger.bus.port import EventLog
from agentledger.errors import RunError
from agentledger.views import RunView, fold
from agentledger.views.store import ViewReader

Source = Literal["views", "log"]


@dataclass(frozen=True)
class Loaded:
    """The view and where it came from."""

    view: RunView
    source: Source


async def load_view(
    log: EventLog,
    run_id: str,
    *,
    reader: ViewReader | None = None,
    barrier_s: float = 2.0,
    poll_s: float = 0.05,
) -> Loaded:
    """The run's view, behind a bounded resume barrier; a new run gives an empty view."""
    if reader is not None:
        positions = await log.run_end_positions(run_id)
        deadline = time.monotonic() + barrier_s
        while True:
            if await reader.progress(positions):
                view = await reader.load(run_id)
                return Loaded(view or RunView(run_id=run_id), "views")
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(poll_s)
    return Loaded(await fold_log(log, run_id), "log")


async def fold_log(log: EventLog, run_id: str) -> RunView:
    """Fold every committed event of the run; a gap in ``seq`` is a corrupt log, not a view."""
    result = fold(RunView(run_id=run_id), await log.read_run(run_id), in_place=True)
    if result.parked:
        seqs = sorted(e.seq for e in result.parked)
        msg = (
            f"events {seqs[:5]} follow a gap after seq {result.view.applied_seq}; "
            "the log lost records (retention?) and cannot be resumed as is"
        )
        raise RunError(msg, run_id=run_id)
    return result.view
