"""Warm the broker before the first peer is measured.

A broker that has just started (a fresh local stack, a fresh machine) commits transactions
several times slower than a warm one for its first half minute or so: on this 2-core machine a
freshly started stack gave the first peer measured an effect step p50 of 26-40 ms where the same
tree gave 5.6-7.2 ms a minute later, and the transaction floor run first gave 11.8 ms against
4.95 ms run second (2026-12-02). The bench measures agentledger first, so without a warm-up a
fresh stack charges agentledger alone for the broker's warm-up. This runs the three-topic
transaction floor's own transactions in windows for at least ``MIN_S`` (a run on a fresh stack
plateaued at 14 ms for a few windows after 10 s before falling to 5 ms, so agreement alone stops
too early), then until two windows in a row have the same p50 (within ``tolerance``), or until
``cap_s``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from bench.peers.base import Env
from bench.peers.floor import KafkaTxn3Floor

WINDOW_STEPS = 100
TOLERANCE = 0.25
MIN_S = 30.0
MIN_WINDOWS = 3
CAP_S = 90.0


def settled(
    p50s: list[float], *, tolerance: float = TOLERANCE, min_windows: int = MIN_WINDOWS
) -> bool:
    """Whether the windows' p50s have stopped falling: at least ``min_windows`` windows, and
    the last two within ``tolerance`` of the larger one."""
    if len(p50s) < max(min_windows, 2):
        return False
    last, before = p50s[-1], p50s[-2]
    return abs(last - before) <= tolerance * max(last, before)


@dataclass(frozen=True)
class Warmup:
    """What the warm-up did, for the report's notes."""

    p50s_ms: tuple[float, ...]
    seconds: float
    capped: bool

    def note(self) -> str:
        """One line for the report."""
        first, last = self.p50s_ms[0], self.p50s_ms[-1]
        how = (
            f"stopped at the {CAP_S:.0f} s cap"
            if self.capped
            else f"at least {MIN_S:.0f} s, then until two windows agreed"
        )
        return (
            f"broker warmed before the first peer: {len(self.p50s_ms)} windows of "
            f"{WINDOW_STEPS} three-topic transactions in {self.seconds:.0f} s ({how}), "
            f"p50 {first:.2f} -> {last:.2f} ms"
        )


async def warm_broker(env: Env, *, cap_s: float = CAP_S) -> Warmup:
    """Commit transactions over three throwaway topics until their p50 stops falling."""
    started = time.perf_counter()
    p50s: list[float] = []
    async with KafkaTxn3Floor(env, "warmup") as floor:
        while True:
            latencies = await floor.run(f"warmup-{len(p50s)}", WINDOW_STEPS)
            p50s.append(statistics.median(latencies) * 1000)
            elapsed = time.perf_counter() - started
            capped = elapsed >= cap_s
            if (settled(p50s) and elapsed >= MIN_S) or capped:
                return Warmup(
                    tuple(p50s), time.perf_counter() - started, capped and not settled(p50s)
                )
