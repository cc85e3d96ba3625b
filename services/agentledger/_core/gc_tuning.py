"""The cyclic garbage collector's settings for the long-running services (projector, reconciler,
fleet worker)."""

from __future__ import annotations

import contextlib
import gc
import sys
import time
from collections.abc import Callable, Iterator

#: The collector's thresholds in a projector, reconciler or fleet worker process (see
#: tune_collector).
GC_THRESHOLDS = (50_000, 50, 100)


def tune_collector() -> None:
    """Make the cyclic garbage collector cheap for a long-running service process; call it
    once, when the process is set up (``agentledger projector``, ``agentledger reconciler`` and
    ``agentledger worker`` do, and each rebuild worker process). Not the SDK's to call: a host
    process that embeds a worker (a Ledger, a FleetWorker) keeps its own policy.

    The services allocate many objects that live until a batch or pass ends, beside many that
    live long: at Python's default thresholds (700, 10, 10) the collector ran every few hundred
    allocations and traversed every live object again and again. Projector: a batch allocates a
    few hundred thousand objects (decoded events, folded views, Redis arguments) and the run
    cache keeps tens of thousands of views alive; bench.projector_cpu-style runs of 40,000
    events on one stack, back to back: 170 us of CPU per event at the default, 121 with the
    collector off, 118 with these thresholds. Reconciler: a pass allocates a few objects per
    intent (views, tasks, futures, events); the collector ran about 110 times in a pass of
    1,000 intents and took 0.17 s of its 1.0 s of CPU (``bench.reconciler`` with a gc callback,
    load 13), with these thresholds once. Fleet worker: its runs' steps allocate a few hundred
    objects each (events, views, futures) over ~100,000 long-lived ones (clients, modules); at
    the default the collector took ~10 % of a step's CPU with 200 runs at once, most of it full
    collections of the long-lived objects (DESIGN.md §13, sessions 15 and 16). What exists at
    start (modules, faust, clients) is frozen out of the collections; cycles are still
    collected, less often.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


_paused = 0  # how many collector_paused blocks are open in this process
_was_enabled = True


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off inside the block, and as it was found after it (the
    outermost of nested blocks restores it).

    For a rebuild's share (projector/workers.py): its fold keeps every run of a partition number
    alive until written, and even at :data:`GC_THRESHOLDS` the collector traversed each of those
    objects twice (young, then middle generation) for no garbage: folding 500,000 records with
    it off left 39-49 unreachable objects for the collection at the end of the share. Off, a
    share used ~2 us less CPU a record (~7 %; DESIGN.md §10, session 14). Objects are still
    freed by their reference counts as always; only cycles wait for the block's end."""
    global _paused, _was_enabled  # noqa: PLW0603 - one collector per process
    if _paused == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _paused += 1
    try:
        yield
    finally:
        _paused -= 1
        if _paused == 0 and _was_enabled:
            gc.enable()


#: A full collection of what :class:`SurvivorFreezer` froze is due once the heap (pymalloc's
#: allocated blocks) has grown by this factor since the last one.
FULL_COLLECTION_GROWTH = 2.0
#: How often :class:`SurvivorFreezer` looks at the heap's size (a walk of pymalloc's arenas).
GROWTH_CHECK_S = 1.0


class SurvivorFreezer:
    """After each batch of a projector: collect what the batch left (young objects only), then
    freeze the survivors out of every later collection.

    Why: a projector's survivors are its run cache (tens of thousands of views, each a few
    dozen tracked objects) and they live for seconds to minutes, until evicted. Once the cache
    is full, each cached view is allocated as an evicted one is freed, so the collector's
    allocation count (allocations minus deallocations) hardly grows: the young generation
    collected every 0.7 s while the cache filled and then every 8-10 s, each collection
    traversing every view cached since the last (220-240 ms of CPU, 350-480 ms of wall at 1,000
    runs/s: a pause long enough to start a backlog; DESIGN.md §16, session 16). Collected after
    every batch, the young generation holds one batch's survivors (well under a ms); frozen,
    they are never traversed again, and an object frozen is still freed by its reference count
    when the cache evicts it.

    What freezing gives up: a cycle among frozen objects that becomes garbage later is found
    only by a full collection. Those are rare here (the collector found 0-23 cyclic objects a
    collection); :meth:`after_batch` makes one (unfreeze, collect everything, freeze again)
    once the heap has grown by ``growth`` since the last, as Python's own rule for its oldest
    generation does (there: by a quarter). So memory stays within that factor of what is live,
    and a projector whose cache stays full pays no full collection at all."""

    def __init__(
        self,
        *,
        growth: float = FULL_COLLECTION_GROWTH,
        check_every_s: float = GROWTH_CHECK_S,
        clock: Callable[[], float] = time.monotonic,
        heap_blocks: Callable[[], int] = sys.getallocatedblocks,
    ) -> None:
        self._growth = growth
        self._check_every_s = check_every_s
        self._clock = clock
        self._heap_blocks = heap_blocks
        self._checked = clock()
        self._base = heap_blocks()
        #: Full collections made (for tests and the curious).
        self.full_collections = 0

    def after_batch(self) -> None:
        """Collect the young generations, freeze what survived; a full collection once the heap
        has grown by the factor (checked at most every ``check_every_s``)."""
        gc.collect(1)
        gc.freeze()
        now = self._clock()
        if now - self._checked < self._check_every_s:
            return
        self._checked = now
        if self._heap_blocks() > self._growth * self._base:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.full_collections += 1
            self._base = self._heap_blocks()
