"""Loading a run's resume view: the projector's view, completed from Kafka where it is behind.

The resume barrier: a resumed writer never continues from a view that misses a committed event.
The end offsets of the run's partitions are read after the previous writer's last commit; the
projector's view is used alone when it has applied everything up to them, else together with
the run's events from the projector's offsets onward, folded on top with the same pure fold. If
the projector is absent or wiped (FLUSHALL), the SDK folds the whole run from Kafka itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Literal

from agentledger.bus.port import EventLog, Position
from agentledger.errors import RunError
from agentledger.views import RunView, fold
from agentledger.views.store import ViewAt, ViewReader

Source = Literal["views", "views+log", "log"]


@dataclass(frozen=True)
class Loaded:
    """The view and where it came from: the projector's view, that view plus the run's events
    it had not applied yet (read from Kafka), or the whole run folded from Kafka."""

    view: RunView
    source: Source


async def load_view(
    log: EventLog,
    run_id: str,
    *,
    reader: ViewReader | None = None,
    barrier_s: float = 0.0,
    poll_s: float = 0.05,
) -> Loaded:
    """The run's view with every committed event in it; a new run gives an empty view.

    If the projector has applied everything up to the run's end offsets (waiting up to
    ``barrier_s`` for it), its view is the answer. Otherwise the view is completed with the
    run's events from the offsets the projector had reached to the end of the log: a short read
    when the projector is just behind, instead of folding the run's partitions from their
    beginning. Without a projector (no views, or Redis wiped), the whole run is folded.
    """
    if reader is None:
        return Loaded(await fold_log(log, run_id), "log")
    deadline = time.monotonic() + barrier_s
    positions, at = await _ends_and_view(log, reader, run_id)
    partitions = [(p.topic, p.partition) for p in positions]
    while True:
        if at is None:  # no projector here (or a rebuild was swapped in while reading)
            return Loaded(await fold_log(log, run_id), "log")
        if at.dropped_from:  # events the projector dropped over its parked cap: not in the view
            return Loaded(await fold_log(log, run_id), "log")
        if at.covers(positions) and not at.parked:
            return Loaded(at.view or RunView(run_id=run_id), "views")
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(poll_s)
        at = await reader.load_at(run_id, partitions)
    tail = await log.read_run(run_id, since=at.progress)
    result = fold(at.view or RunView(run_id=run_id), [*at.parked, *tail], in_place=True)
    if result.parked:  # the log itself has a gap there: let the whole fold say so
        return Loaded(await fold_log(log, run_id), "log")
    return Loaded(result.view, "views+log")


async def _ends_and_view(
    log: EventLog, reader: ViewReader, run_id: str
) -> tuple[list[Position], ViewAt | None]:
    """The run's end offsets, and its view with the progress it is complete up to.

    A reader that needs no partitions to ask (:attr:`ViewReader.reads_every_partition`) reads
    beside the end offsets instead of after them. Which read comes first does not matter: the
    view is used alone only when the progress read with it reaches the end offsets (taken after
    the previous writer's last commit either way), and everything below that progress is in
    the view; else the log is read from that progress to its end.
    """
    if not reader.reads_every_partition:
        positions = await log.run_end_positions(run_id)
        return positions, await reader.load_at(run_id, [(p.topic, p.partition) for p in positions])
    ends = asyncio.ensure_future(log.run_end_positions(run_id))
    try:
        at = await reader.load_at_every(run_id)
        if at is not None and at.view is not None and not ends.done():
            # While the offsets are asked: the place and state of every effect, which the
            # resume reads next (open intents, the effect index), kept with the stored values.
            at.view.effect_briefs()
    except BaseException:
        ends.cancel()
        with contextlib.suppress(BaseException):
            await ends
        raise
    return await ends, at


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
