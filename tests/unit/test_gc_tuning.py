"""The garbage collector settings of the projector and reconciler processes."""

from __future__ import annotations

import gc
import weakref

from agentledger._core.gc_tuning import (
    GC_THRESHOLDS,
    SurvivorFreezer,
    collector_paused,
    tune_collector,
)


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


def _in_a_generation(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Heap:
    def __init__(self) -> None:
        self.blocks = 1000

    def __call__(self) -> int:
        return self.blocks


def test_after_a_batch_its_cycles_are_collected_and_its_survivors_frozen() -> None:
    """after_batch frees the cyclic garbage a batch left and moves what survived out of every
    generation the collector walks (the permanent one), where it stays alive."""
    survivors = SurvivorFreezer(clock=_Clock(), heap_blocks=_Heap())
    try:
        kept = {"view": [1, 2, 3]}
        cycle = _Node()
        cycle.other = cycle
        gone = weakref.ref(cycle)
        del cycle
        assert _in_a_generation(kept)
        survivors.after_batch()
        assert gone() is None
        assert not _in_a_generation(kept)
        assert kept == {"view": [1, 2, 3]}
    finally:
        gc.unfreeze()


def test_frozen_cycles_are_collected_once_the_heap_has_grown_by_the_factor() -> None:
    """A cycle that turns to garbage after it was frozen stays until the heap has grown by the
    factor since the last full collection; then one full collection frees it, and the heap
    it leaves is the new base."""
    clock, heap = _Clock(), _Heap()
    survivors = SurvivorFreezer(growth=2.0, check_every_s=1.0, clock=clock, heap_blocks=heap)
    try:
        cycle = _Node()
        cycle.other = cycle
        gone = weakref.ref(cycle)
        survivors.after_batch()  # alive at the batch's end: frozen
        del cycle
        clock.now, heap.blocks = 5.0, 1999  # grown, not by the factor
        survivors.after_batch()
        assert gone() is not None
        assert survivors.full_collections == 0
        clock.now, heap.blocks = 10.0, 2001
        survivors.after_batch()
        assert gone() is None
        assert survivors.full_collections == 1
        clock.now, heap.blocks = 20.0, 3000  # under twice the new base
        survivors.after_batch()
        assert survivors.full_collections == 1
    finally:
        gc.unfreeze()


def test_the_heap_is_looked_at_no_more_often_than_the_interval() -> None:
    """A heap grown past the factor makes no full collection until ``check_every_s`` has
    passed since the last look."""
    clock, heap = _Clock(), _Heap()
    survivors = SurvivorFreezer(growth=2.0, check_every_s=1.0, clock=clock, heap_blocks=heap)
    try:
        heap.blocks = 5000
        clock.now = 0.5
        survivors.after_batch()
        assert survivors.full_collections == 0
        clock.now = 1.0
        survivors.after_batch()
        assert survivors.full_collections == 1
    finally:
        gc.unfreeze()
