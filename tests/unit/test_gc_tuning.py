"""The garbage collector settings of the projector and reconciler processes."""

from __future__ import annotations

import gc
import weakref

from agentledger._core.gc_tuning import GC_THRESHOLDS, collector_paused, tune_collector


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


def test_a_paused_collector_is_off_inside_and_as_it_was_after() -> None:
    """Inside collector_paused (nested too) the collector is off; after the outermost block it
    is on again if it was on before, and stays off if it was off."""
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_paused_collector_is_restored_when_the_block_fails() -> None:
    """An error inside collector_paused leaves the collector as it was found."""
    try:
        with collector_paused():
            raise KeyError
    except KeyError:
        pass
    assert gc.isenabled()
