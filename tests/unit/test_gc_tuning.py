"""The garbage collector settings of the projector and reconciler processes."""

from __future__ import annotations

import gc
import weakref

from agentledger._core.gc_tuning import GC_THRESHOLDS, tune_collector


class _Node:
    other: object = None


def test_tuning_raises_the_thresholds_and_freezes_what_exists() -> None:
    """After tune_collector the collector runs at the services' thresholds (far above the
    default 700 allocations) and what existed before is in the permanent generation; cycles
    made afterwards are still collected."""
    before = gc.get_threshold()
    try:
        tune_collector()
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] > before[0]
        assert gc.get_freeze_count() > 0
        cycle = _Node()
        cycle.other = cycle
        gone = weakref.ref(cycle)
        del cycle
        gc.collect()
        assert gone() is None
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
