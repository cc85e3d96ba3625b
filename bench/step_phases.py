"""``python -m bench.step_phases [--steps N]``: where one effect step's wall time goes, phase by
phase, on the local stack (a diagnostic, not a figure of the bench).

The bench's ``agentledger`` row is run step by step (one run, ``--steps`` effect steps) with a
timestamp taken at each phase boundary of the step: the step's start, ``publish`` called, the
commit loop taking the batch, the fence check's answer, AddPartitionsToTxn, the produce
acknowledgement, EndTxn, ``publish`` returning, the provider call, the step's end. Printed: the
p50 (and p90) over the steps of the time between consecutive boundaries, and how many
AddPartitionsToTxn requests (CONCURRENT_TRANSACTIONS retries included) a step sent.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.producer import sender

import agentledger.bus.kafka as kafka_log
from agentledger.bus.fencing import stale_claims
from agentledger.cli import configure_logging
from agentledger.providers.memory import MemoryProvider
from agentledger.worker.run import Run
from bench.harness import percentile
from bench.peers.ledger_sdk import LedgerSdkPeer
from bench.profile import _env

# (owner, attribute, mark at entry, mark at exit); a mark seen twice in a step keeps the first
# entry and the last exit (a retried AddPartitionsToTxn counts once, its retries are counted).
HOOKS: list[tuple[Any, str, str | None, str | None]] = [
    (Run, "step", "step start", "step end"),
    (kafka_log.KafkaEventLog, "publish", "publish called", "publish returned"),
    (kafka_log.KafkaEventLog, "_commit_once", "loop took the batch", None),
    (AIOKafkaProducer, "begin_transaction", None, "begun"),
    (AIOKafkaProducer, "send", "first send", "sends queued"),
    (sender.AddPartitionsToTxnHandler, "do", "add partitions sent", "partitions added"),
    (sender.SendProduceReqHandler, "do", "produce sent", "produce acked"),
    (sender.EndTxnHandler, "do", "end txn sent", "committed"),
    (MemoryProvider, "perform", "provider called", "provider returned"),
]


class Marks:
    """Per step: the time of each boundary, and how often each hook ran."""

    def __init__(self) -> None:
        self.steps: list[dict[str, float]] = []
        self.counts: list[dict[str, int]] = []
        self.current: dict[str, float] | None = None

    def mark(self, name: str, *, last: bool) -> None:
        """Record ``name`` now (the first time, or every time if ``last``)."""
        if self.current is None:
            return
        if last or name not in self.current:
            self.current[name] = time.perf_counter()
        self.counts[-1][name] = self.counts[-1].get(name, 0) + 1

    def wrap(
        self, fn: Callable[..., Awaitable[Any]], enter: str | None, leave: str | None
    ) -> Callable[..., Awaitable[Any]]:
        """``fn`` marking ``enter`` before and ``leave`` after each call."""
        opens_step = enter == "step start"

        async def marked(*args: Any, **kwargs: Any) -> Any:
            if opens_step:
                self.current = {}
                self.steps.append(self.current)
                self.counts.append({})
            if enter is not None:
                self.mark(enter, last=False)
            try:
                return await fn(*args, **kwargs)
            finally:
                if leave is not None:
                    self.mark(leave, last=True)
                if opens_step:
                    self.current = None

        return marked

    def install(self) -> None:
        """Wrap every hook (process-wide: this is a diagnostic process)."""
        for owner, attr, enter, leave in HOOKS:
            setattr(owner, attr, self.wrap(getattr(owner, attr), enter, leave))

        async def checked(*args: Any, **kwargs: Any) -> Any:
            self.mark("fence check started", last=False)
            try:
                return await stale_claims(*args, **kwargs)
            finally:
                self.mark("fence checked", last=True)

        # kafka.py calls the name it imported: replace it there
        vars(kafka_log)["stale_claims"] = checked

    def breakdown(self, skip: int) -> dict[str, Any]:
        """p50/p90 ms between consecutive boundaries, in the order they happened (median)."""
        steps = [s for s in self.steps[skip:] if "provider called" in s]
        order: dict[str, list[float]] = defaultdict(list)
        for s in steps:
            for name, t in s.items():
                order[name].append(t - s["step start"])
        names = sorted(order, key=lambda n: percentile(order[n], 50))
        out: dict[str, Any] = {"steps": len(steps)}
        for prev, name in itertools.pairwise(names):
            gaps = [s[name] - s[prev] for s in steps if name in s and prev in s]
            out[f"{prev} -> {name}"] = {
                "p50_ms": round(percentile(gaps, 50) * 1000, 3),
                "p90_ms": round(percentile(gaps, 90) * 1000, 3),
                "n": len(gaps),
            }
        total = [s["step end"] - s["step start"] for s in steps]
        out["step total"] = {
            "p50_ms": round(percentile(total, 50) * 1000, 3),
            "p90_ms": round(percentile(total, 90) * 1000, 3),
        }
        counts = self.counts[skip:]
        out["add partitions requests per step p50"] = percentile(
            [float(c.get("add partitions sent", 0)) for c in counts], 50
        )
        out["add partitions requests per step max"] = max(
            (c.get("add partitions sent", 0) for c in counts), default=0
        )
        return out


async def _measure(steps: int) -> dict[str, Any]:
    env = await _env()
    marks = Marks()
    marks.install()
    async with LedgerSdkPeer.sidecar(env, "phases"):
        peer = LedgerSdkPeer(env, "phases")
        await peer.start()
        try:
            await peer.run("warmup", 20)
            marks.steps.clear()
            marks.counts.clear()
            await peer.run("phases", steps)
        finally:
            await peer.stop()
    return marks.breakdown(skip=1)


def main() -> None:
    """Print the breakdown as JSON."""
    p = argparse.ArgumentParser(prog="python -m bench.step_phases", description=__doc__)
    p.add_argument("--steps", type=int, default=300)
    a = p.parse_args()
    configure_logging("WARNING")
    print(json.dumps(asyncio.run(_measure(a.steps)), indent=1))


if __name__ == "__main__":
    main()
