"""``python -m bench.profile [--steps N] [--cprofile] [--resumes N] [--against TREE]
[--concurrent RUNS]``: where a step, an open and a resume of the agentledger SDK spend their
time, on the local stack (a diagnostic, not a figure of the bench).

Each port call the worker makes while opening is wrapped in a timer: connections (the producer's
start, InitProducerId), end offsets, the projector's view, the log's tail, the lease, and the
commit that carries RunResumed. The resume is done by a fresh process (``resume`` mode), as the
bench's resume figure is; ``--cprofile`` gives the hottest functions of the step loop and of
each resume process (open to ready). ``--resumes N`` resumes the crashed run N times, each by a
fresh process with the projector running; ``--against TREE`` alternates them with resumes by
the code of another checkout (``git worktree add``; its ``services/`` with this checkout's
harness, so both are measured by the same code), back to back, with the load average of each,
and gives each tree's median. ``--first-step``: each resume then replays the run's recorded
steps and runs the next one, and open -> that step done is reported beside open -> ready.
``--concurrent RUNS`` measures instead the bench's concurrency figure (RUNS runs of ``--steps``
steps started together, opens and finishes included): process CPU per step and, with
``--cprofile``, its hottest functions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import json
import os
import pstats
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import agentledger
from agentledger.bus.kafka import KafkaEventLog
from agentledger.cli import configure_logging
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.settings import CommonSettings
from agentledger.stack import resolve_endpoints
from agentledger.views.redis_store import RedisViewStore
from bench.harness import percentile
from bench.peers.base import Env
from bench.peers.ledger_sdk import LedgerSdkPeer

PHASES: dict[str, tuple[type, str]] = {
    # the log's start, awaited by start() or going on in the background (start_soon, whose
    # calls wait for it: then it overlaps the Redis phases, and "other" is what is left of
    # the total after phases that ran side by side)
    "connections": (KafkaEventLog, "_start"),
    "end offsets": (KafkaEventLog, "run_end_positions"),
    "view": (RedisViewStore, "load_at_every"),  # load_at reads through it
    "tail": (KafkaEventLog, "read_run"),
    "lease": (RedisLeaseStore, "acquire"),
    "commits": (KafkaEventLog, "publish"),
}


class Timers:
    """Seconds spent in each wrapped call, by phase, while ``recording``."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.recording = False

    def install(self) -> None:
        """Wrap every method of :data:`PHASES` (process-wide: this is a diagnostic process)."""
        for phase, (cls, attr) in PHASES.items():
            setattr(cls, attr, self._wrap(phase, getattr(cls, attr)))

    def _wrap(self, phase: str, fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                if self.recording:
                    self.spent[phase] += time.perf_counter() - start
                    self.calls[phase] += 1

        return timed

    @contextmanager
    def record(self) -> Iterator[None]:
        """Count what happens inside, from zero."""
        self.spent.clear()
        self.calls.clear()
        self.recording = True
        try:
            yield
        finally:
            self.recording = False

    def breakdown(self, total_s: float) -> dict[str, Any]:
        """Milliseconds per phase, the calls made, and what no wrapped call explains."""
        out: dict[str, Any] = {
            p: {"ms": round(self.spent[p] * 1000, 2), "calls": self.calls[p]}
            for p in PHASES
            if self.calls[p]
        }
        out["other (fold, checks, events, Python)"] = {
            "ms": round((total_s - sum(self.spent.values())) * 1000, 2)
        }
        out["total"] = {"ms": round(total_s * 1000, 2)}
        return out


async def _env() -> Env:
    endpoints = await resolve_endpoints(CommonSettings())
    return Env(
        work_dir="/tmp",
        kafka_bootstrap=endpoints.kafka_bootstrap,
        redis_url=endpoints.redis_url,
    )


async def _measure(
    steps: int,
    use_cprofile: bool,
    resumes: int = 1,
    against: list[str] | None = None,
    first_step: bool = False,
) -> dict[str, Any]:
    env = await _env()
    against = against or []
    timers = Timers()
    timers.install()
    report: dict[str, Any] = {}
    async with LedgerSdkPeer.sidecar(env, "profile"):
        peer = LedgerSdkPeer(env, "profile")
        await peer.start()
        try:
            await peer.run("warmup", 5)
            opens: list[float] = []
            with timers.record():
                for i in range(10):
                    await peer.run(f"open-{i}", 1)
            opens = [x * 1000 for x in peer.open_s[-10:]]
            report["open_new_run_ms_p50"] = round(percentile(opens, 50), 2)
            report["open_and_one_step_breakdown_10_runs"] = timers.breakdown(
                sum(timers.spent.values())
            )
            profiler = cProfile.Profile() if use_cprofile else None
            cpu = time.process_time()
            start = time.perf_counter()
            with timers.record():
                if profiler is not None:
                    profiler.enable()
                lat = await peer.run("steps", steps)
                if profiler is not None:
                    profiler.disable()
            wall = time.perf_counter() - start
            report["step_p50_ms"] = round(percentile([x * 1000 for x in lat], 50), 3)
            report["cpu_us_per_step_1run"] = round((time.process_time() - cpu) * 1e6 / steps, 1)
            report["step_loop_breakdown"] = timers.breakdown(wall)
            if profiler is not None:
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
                report["cprofile_top"] = text.getvalue().splitlines()[:60]
            # A run left open mid-way, resumed by a fresh process.
            crashed = f"crashed-{time.time_ns()}"
            # each resume that runs its first step leaves the run one step longer: the plan
            # leaves room for all of them
            planned = steps + 1 + (resumes * (1 + len(against)) if first_step else 0)
            await _crash_run(peer, crashed, steps, planned)
        finally:
            await peer.stop()
        resumed: list[dict[str, Any]] = []
        trees = [None, *against]
        for i in range(resumes * len(trees)):
            await asyncio.sleep(1.0)  # let the projector catch up, as a real restart would
            tree = trees[i % len(trees)]
            resumed.append(await _resume_process(crashed, steps, use_cprofile, tree, first_step))
        report.update(_resume_report(resumed, against))
    return report


#: This checkout (bench/ is its harness, for the resumes of every tree).
_HERE = Path(__file__).resolve().parent.parent


async def _resume_process(
    run_id: str, steps: int, use_cprofile: bool, tree: str | None, first_step: bool = False
) -> dict[str, Any]:
    """One resume of ``run_id`` by a fresh process, of this tree's code or of ``tree``'s
    services (the harness, bench/, is this tree's in both, so both are measured alike)."""
    env = None
    if tree is not None:
        env = {**os.environ, "PYTHONPATH": f"{tree}/services:{_HERE}"}
    load = os.getloadavg()[0]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.profile",
        "--resume",
        run_id,
        "--steps",
        str(steps),
        *(["--cprofile"] if use_cprofile else []),
        *(["--first-step"] if first_step else []),
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=_HERE,
    )
    stdout, _ = await proc.communicate()
    out: dict[str, Any] = json.loads(stdout.decode().strip().splitlines()[-1])
    out["tree"] = tree or "."
    out["load1"] = round(load, 2)
    return out


def _resume_report(resumed: list[dict[str, Any]], against: list[str]) -> dict[str, Any]:
    """Each resume as measured, and the median total and CPU of each tree's resumes."""
    if len(resumed) == 1:
        return {"resume_fresh_process": resumed[0]}
    medians: dict[str, Any] = {}
    for tree in [".", *against]:
        mine = [r for r in resumed if r["tree"] == tree]
        medians[tree] = {
            "total_ms_p50": round(percentile([r["breakdown"]["total"]["ms"] for r in mine], 50), 2),
            "cpu_ms_p50": round(percentile([r["cpu_ms"] for r in mine], 50), 2),
            "gc_ms_p50": round(percentile([r["gc_to_ready"]["ms"] for r in mine], 50), 2),
            "resumes": len(mine),
        }
        if all("first_step" in r for r in mine):
            for key in ("ms", "cpu_ms"):
                firsts = [r["first_step"][key] for r in mine]
                medians[tree][f"first_step_{key}_p50"] = round(percentile(firsts, 50), 2)
    return {"resumes_fresh_process": resumed, "resume_p50_by_tree": medians}


async def _concurrent(runs: int, steps: int, repeats: int, use_cprofile: bool) -> dict[str, Any]:
    """``repeats`` rounds of ``runs`` runs of ``steps`` steps started together, as the bench's
    concurrency figure runs them; CPU per step over every round after a warm-up round."""
    env = await _env()
    report: dict[str, Any] = {"runs": runs, "steps": steps, "repeats": repeats}
    async with LedgerSdkPeer.sidecar(env, "profile-conc"):
        peer = LedgerSdkPeer(env, "profile-conc")
        await peer.start()
        try:
            await asyncio.gather(*(peer.run(f"warm-{n}", steps) for n in range(runs)))
            profiler = cProfile.Profile() if use_cprofile else None
            cpu = time.process_time()
            start = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            for i in range(repeats):
                await asyncio.gather(*(peer.run(f"conc-{i}-{n}", steps) for n in range(runs)))
            if profiler is not None:
                profiler.disable()
            wall = time.perf_counter() - start
            total = runs * steps * repeats
            report["cpu_us_per_step"] = round((time.process_time() - cpu) * 1e6 / total, 1)
            report["steps_per_s"] = round(total / wall, 1)
            report["commits"] = peer.ledger.services.log.stats.commits  # type: ignore[attr-defined]
            if profiler is not None:
                profiler.dump_stats("/tmp/agentledger-profile-concurrent.pstats")
                for order in ("tottime", "cumulative"):
                    text = io.StringIO()
                    pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(45)
                    report[f"cprofile_{order}"] = text.getvalue().splitlines()
        finally:
            await peer.stop()
    return report


async def _crash_run(peer: LedgerSdkPeer, run_id: str, steps: int, planned: int) -> None:
    """``steps`` steps of a run of ``planned`` steps, then the handle is dropped unfinished
    (as a crash between steps: the lease is left to the resumer, same worker id)."""

    async def stop_early(done: int) -> None:
        if done == steps:
            raise _Stop

    with contextlib.suppress(_Stop):
        await peer.run(run_id, planned, stop_early)


class _Stop(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Ends the crashed run between steps."""


class _Collections:
    """The cyclic collector's passes (by generation) and their time, while ``counting``."""

    def __init__(self) -> None:
        self.passes = [0, 0, 0]
        self.spent_s = 0.0
        self.counting = True
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if not self.counting:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.passes[info["generation"]] += 1
            self.spent_s += time.perf_counter() - self._began


async def _resume(
    run_id: str, steps: int, use_cprofile: bool, first_step: bool = False
) -> dict[str, Any]:
    env = await _env()
    timers = Timers()
    timers.install()
    ready: list[float] = []
    cpu_ms: list[float] = []
    stepped: list[tuple[float, float]] = []
    collections = _Collections()
    gc.callbacks.append(collections)
    profiler = cProfile.Profile() if use_cprofile else None
    with timers.record():
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        cpu = time.process_time()
        peer = LedgerSdkPeer(env, "profile", fresh=False)
        await peer.start()

        async def probe(done: int) -> None:
            ready.append(time.perf_counter() - start)
            cpu_ms.append((time.process_time() - cpu) * 1000)
            collections.counting = False
            if profiler is not None:
                profiler.disable()
            # what the run writes after it is ready (a queued RunResumed committed as the
            # handle closes) is not part of the resume
            timers.recording = False

        async def step_done(done: int) -> None:
            stepped.append((time.perf_counter() - start, time.process_time() - cpu))

        if first_step:
            await peer.resume_and_step(run_id, steps, probe, step_done)
        else:
            await peer.resume(run_id, steps, probe)
    await peer.stop()
    out: dict[str, Any] = {
        "detail": peer.resume_detail,
        "services": str(Path(agentledger.__file__).parent.parent),
        "cpu_ms": round(cpu_ms[0], 2),
        "gc_to_ready": {
            "passes": collections.passes,
            "ms": round(collections.spent_s * 1000, 2),
        },
        "breakdown": timers.breakdown(ready[0]),
    }
    if stepped:  # open -> the first step not checkpointed done (the recorded ones replayed)
        out["first_step"] = {
            "ms": round(stepped[0][0] * 1000, 2),
            "cpu_ms": round(stepped[0][1] * 1000, 2),
        }
    if profiler is not None:  # open -> ready only (the profiler slows it: the times above too)
        for order in ("tottime", "cumulative"):
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats(order).print_stats(30)
            out[f"cprofile_{order}"] = text.getvalue().splitlines()[:60]
    return out


def main() -> None:
    """Print the profile as JSON."""
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--cprofile", action="store_true")
    p.add_argument("--concurrent", type=int, default=0, metavar="RUNS")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--resumes", type=int, default=1, help="fresh-process resumes (of each tree)")
    p.add_argument(
        "--against",
        action="append",
        default=[],
        metavar="TREE",
        help="alternate the resumes with ones by TREE's code (a checkout), back to back",
    )
    p.add_argument(
        "--first-step",
        action="store_true",
        help="each resume then replays the recorded steps and runs the next one: open -> "
        "that step done is reported beside open -> ready (the run grows a step per resume)",
    )
    p.add_argument("--resume", help=argparse.SUPPRESS)
    a = p.parse_args()
    trees = [str(Path(t).resolve()) for t in a.against]
    configure_logging("WARNING")
    if a.concurrent:
        report = asyncio.run(_concurrent(a.concurrent, a.steps, a.repeats, a.cprofile))
        for order in ("tottime", "cumulative"):
            print("\n".join(report.pop(f"cprofile_{order}", [])))
        print(json.dumps(report, indent=1))
        return
    if a.resume:
        print(json.dumps(asyncio.run(_resume(a.resume, a.steps, a.cprofile, a.first_step))))
        return
    report = asyncio.run(_measure(a.steps, a.cprofile, a.resumes, trees, a.first_step))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
