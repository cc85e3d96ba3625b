"""The reconciler's claimer: the view it acts on holds every committed event of the run."""

from __future__ import annotations

from agentledger.leasing import MemoryLeaseStore
from agentledger.reconciler.claim import RunClaimer
from agentledger.views import RunView, fold
from agentledger.views.memory_store import MemoryViewStore
from agentledger.views.store import RunWrite

from .test_fold_into_store import run_events
from .test_sdk_loader import SinceLog

RUN = "r-claim"


async def test_views_behind_give_the_view_plus_the_unapplied_tail() -> None:
    """When the projector has not applied a run's last commit within the barrier, the claim's
    view is its stored view completed from the projector's offsets, not a fold of whole
    partitions, and it equals the fold of every event."""
    log, views, leases = SinceLog(), MemoryViewStore(), MemoryLeaseStore()
    events = run_events(RUN, steps=2)
    first, rest = events[:6], events[6:]
    await log.publish(first)
    namespace = await views.live_namespace(create=True)
    assert namespace is not None
    done = fold(RunView(run_id=RUN), first)
    write = RunWrite(RUN, None, done.view, steps=done.touched_steps, effects=done.touched_effects)
    await views.write_runs(namespace, [write])
    applied = {(p.topic, p.partition): p.offset for p in await log.run_end_positions(RUN)}
    await views.record_progress(namespace, applied)
    await log.publish(rest)
    claimer = RunClaimer(log, views, leases, owner="reconciler", ttl_ms=5_000, barrier_s=0.0)
    async with claimer.claim(RUN) as claim:
        assert claim.view.applied_seq == len(events)
        assert claim.view == fold(RunView(run_id=RUN), events).view
    assert log.reads == [applied]
