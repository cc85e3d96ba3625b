"""The cyclic garbage collector's settings for the long-running services (projector, reconciler,
fleet worker)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

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
