"""One peer's measurements, in a process of its own (``python -m bench.child MODE …``).

``measure`` runs every figure of one peer and writes raw samples as JSON; it spawns ``crash``
(a run of N steps that dies hard before step N+1, reporting bytes stored at the marks) and
``resume`` (a fresh process that reopens that run until it is ready for step N+1).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from agentledger.cli import configure_logging
from bench.harness import growth_exponent
from bench.peers import load
from bench.peers.base import Env, MarkedProbe, Peer, PeerUnavailableError
from bench.workload import Params

RESUME_RUN = "resume-run"
CHILD_TIMEOUT_S = 900.0
CONCURRENT_TIMEOUT_S = 180.0
OPEN_SAMPLES = 20


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _spawn(args: list[str], out: Path, timeout: float) -> dict[str, Any]:
    """Run ``python -m bench.child ARGS --out OUT`` and return what it wrote."""
    out.unlink(missing_ok=True)
    argv = [sys.executable, "-m", "bench.child", *args, "--out", str(out)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"{args[0]} timed out after {timeout:.0f} s"}
    if not out.exists():
        tail = (proc.stderr or proc.stdout)[-1500:]
        return {"error": f"{args[0]} exited {proc.returncode} without a result: {tail}"}
    result: dict[str, Any] = json.loads(out.read_text())
    return result


async def _latency(peer: Peer, params: Params, result: dict[str, Any]) -> None:
    await peer.run("warmup", params.warmup_steps)
    peer.open_s.clear()  # the warm-up's open paid for connections, not for opening a run
    runs = []
    for i in range(params.latency_repeats):
        start = time.perf_counter()
        cpu = time.process_time()
        lat = await peer.run(f"latency-{i}", params.latency_steps)
        runs.append(
            {
                "latencies": [round(x, 7) for x in lat],
                "elapsed": time.perf_counter() - start,
                # Process CPU (every thread of the measuring process; not the servers, nor
                # agentledger's projector process) over the run, opening included.
                "cpu_s": time.process_time() - cpu,
            }
        )
    result["latency_runs"] = runs
    for i in range(OPEN_SAMPLES):  # one-step runs: more samples of opening a new run
        await peer.run(f"open-{i}", 1)
    if peer.open_s:  # sequential opens only: the concurrent ones queue behind each other
        result["open_s"] = [round(x, 7) for x in peer.open_s]


async def _concurrency(peer: Peer, params: Params, result: dict[str, Any]) -> None:
    """Repeats of ``concurrent_runs`` runs started together; a repeat whose runs do not all
    return within CONCURRENT_TIMEOUT_S is dropped and reported (it is a hang, not a figure)."""
    runs = []
    hangs: list[str] = []
    for i in range(params.concurrent_repeats):
        ids = [f"conc-{i}-{n}" for n in range(params.concurrent_runs)]
        start = time.perf_counter()
        cpu = time.process_time()
        tasks = [asyncio.ensure_future(peer.run(r, params.concurrent_steps)) for r in ids]
        done, pending = await asyncio.wait(tasks, timeout=CONCURRENT_TIMEOUT_S)
        elapsed = time.perf_counter() - start
        cpu_s = time.process_time() - cpu
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=10.0)
            hangs.append(
                f"repeat {i}: {len(pending)} of {len(ids)} runs had not returned after "
                f"{CONCURRENT_TIMEOUT_S:.0f} s"
            )
            continue
        for task in done:
            task.result()  # a failed run fails the figure, with its error
        runs.append(
            {
                "runs": params.concurrent_runs,
                "steps": params.concurrent_steps,
                "elapsed": elapsed,
                "cpu_s": cpu_s,
            }
        )
    if hangs:
        result["errors"]["concurrency_hangs"] = "; ".join(hangs)
    if runs:
        result["concurrent_runs"] = runs


def _crash_and_resume(
    name: str, env: Env, params: Params, work: Path, result: dict[str, Any]
) -> None:
    """The crash child writes ``resume_steps`` steps (bytes at the marks); resume children time
    the fresh-process reopen of that run."""
    marks = [m for m in params.bytes_marks if m <= params.resume_steps]
    common = [
        "--peer",
        name,
        "--env",
        json.dumps(env.to_json()),
        "--namespace",
        "resume",
        "--run-id",
        RESUME_RUN,
        "--steps",
        str(params.resume_steps),
    ]
    crash = _spawn(
        ["crash", *common, "--marks", ",".join(map(str, marks))],
        work / f"{name}-crash.json",
        CHILD_TIMEOUT_S,
    )
    if "error" in crash:
        result["errors"]["bytes"] = crash["error"]
        result["errors"]["resume"] = "no crashed run to resume: " + crash["error"]
        return
    result["bytes"] = crash["bytes"]
    if not crash["resumable"]:
        result["errors"]["resume"] = crash.get("resume_reason", "not resumable")
        return
    resumes = []
    for i in range(params.resume_repeats):
        spawned = time.time()
        r = _spawn(
            ["resume", *common, "--spawned-at", repr(spawned)],
            work / f"{name}-resume-{i}.json",
            CHILD_TIMEOUT_S,
        )
        if "error" in r:
            result["errors"]["resume"] = r["error"]
            return
        resumes.append(r)
    result["resume"] = resumes


async def _bytes_run(
    peer_cls: type[Peer], env: Env, namespace: str, steps: int, marks: list[int]
) -> dict[str, int]:
    """One run of ``steps`` steps in a fresh namespace; bytes stored at each mark."""
    async with peer_cls(env, namespace) as peer:
        base = await peer.stored_bytes()
        found: dict[str, int] = {}

        async def measure(done: int) -> None:
            found[str(done)] = await peer.stored_bytes() - base

        await peer.run(f"{namespace}-run", steps, MarkedProbe(frozenset(marks), measure))
        if steps in marks:
            found[str(steps)] = await peer.stored_bytes() - base
    return found


async def _big_bytes(
    peer_cls: type[Peer], env: Env, params: Params, result: dict[str, Any]
) -> None:
    """Bytes after the marks beyond the crash run (10,000 steps), or a projection when the
    measured growth says the run would write more than ``max_bytes_run``."""
    big = [m for m in params.bytes_marks if m > params.resume_steps]
    if not big or "bytes" not in result:
        return
    measured = {int(k): float(v) for k, v in result["bytes"].items()}
    k = growth_exponent(measured)
    top = max(measured)
    projected = {m: measured[top] * (m / top) ** k for m in big} if k is not None else {}
    if projected and max(projected.values()) > params.max_bytes_run:
        result["bytes_projected"] = {str(m): v for m, v in projected.items()}
        result["bytes_projected_reason"] = (
            f"not run: growth exponent {k:.2f} from the measured points projects "
            f"{max(projected.values()) / 1e9:.1f} GB (limit {params.max_bytes_run / 1e9:.0f} GB)"
        )
        return
    async with peer_cls.sidecar(env, "bytes"):
        result["bytes"].update(await _bytes_run(peer_cls, env, "bytes", max(big), big))


async def _timed(phases: dict[str, float], name: str, work: Any) -> None:
    start = time.perf_counter()
    try:
        await work
    finally:
        phases[name] = round(time.perf_counter() - start, 2)


async def measure(name: str, env: Env, params: Params, out: Path) -> None:
    """Every figure of one peer; each figure fails alone, with its reason."""
    phases: dict[str, float] = {}
    result: dict[str, Any] = {
        "peer": name,
        "status": "ok",
        "errors": {},
        "notes": [],
        "phases": phases,
    }
    try:
        peer_cls = load(name)
        result["kind"] = peer_cls.kind
        async with peer_cls.sidecar(env, "main"), peer_cls(env, "main") as peer:
            for figure, step in (("latency", _latency), ("concurrency", _concurrency)):
                try:
                    await _timed(phases, figure, step(peer, params, result))
                except Exception as e:  # noqa: BLE001 - one figure fails, the others still run
                    result["errors"][figure] = f"{type(e).__name__}: {e}"
            result["notes"] = peer.notes()
    except PeerUnavailableError as e:
        result.update(status="unavailable", reason=str(e))
        _write(out, result)
        return
    except Exception as e:  # noqa: BLE001 - report the peer as failed with its reason
        result.update(
            status="error",
            reason=f"{type(e).__name__}: {e}",
            traceback=traceback.format_exc()[-3000:],
        )
        _write(out, result)
        return
    try:
        if peer_cls.resumable:
            async with peer_cls.sidecar(env, "resume"):
                await _timed(
                    phases,
                    "crash_and_resume",
                    asyncio.to_thread(_crash_and_resume, name, env, params, out.parent, result),
                )
        else:  # nothing to resume: the bytes run needs no crash, nor a process of its own
            result["errors"]["resume"] = f"{name} keeps no run state to resume"
            marks = [m for m in params.bytes_marks if m <= params.resume_steps]
            async with peer_cls.sidecar(env, "resume"):
                result["bytes"] = await _bytes_run(
                    peer_cls, env, "resume", params.resume_steps, marks
                )
        await _timed(phases, "bytes_big", _big_bytes(peer_cls, env, params, result))
    except Exception as e:  # noqa: BLE001 - the figures measured so far are still reported
        result["errors"]["bytes"] = f"{type(e).__name__}: {e}"
    _write(out, result)


async def crash(
    name: str, env: Env, *, run_id: str, steps: int, marks: list[int], out: Path
) -> None:
    """Run ``steps`` steps, measuring bytes at the marks, then die (os._exit) before step N+1."""
    peer_cls = load(name)
    peer = peer_cls(env, "resume")
    await peer.start()
    base = await peer.stored_bytes()
    found: dict[str, int] = {}

    async def probe(done: int) -> None:
        if done in marks:
            found[str(done)] = await peer.stored_bytes() - base
        if done == steps:
            reason = "" if peer.resumable else f"{name} keeps no run state to resume"
            _write(out, {"bytes": found, "resumable": peer.resumable, "resume_reason": reason})
            os._exit(0)  # a hard crash: no cleanup, nothing flushed that was not durable

    await peer.run(run_id, steps + 1, MarkedProbe(frozenset([*marks, steps]), probe))
    msg = f"{name}: the run ended without reaching step {steps + 1}"
    raise PeerUnavailableError(msg)


async def resume(
    name: str, env: Env, *, run_id: str, steps: int, spawned_at: float, out: Path
) -> None:
    """Reopen the crashed run in this fresh process; time until it is ready for step N+1."""
    peer_cls = load(name)  # library imports are done before the clock starts
    start = time.perf_counter()
    cpu = time.process_time()
    peer = peer_cls(env, "resume", fresh=False)

    async def probe(done: int) -> None:
        ready = time.perf_counter()
        cpu_s = time.process_time() - cpu
        if done < steps:  # a replaying peer (DBOS) walks the recorded steps first
            return
        if done != steps:
            _write(out, {"error": f"resumed at step {done + 1}, expected {steps + 1}"})
        else:
            _write(
                out,
                {
                    "resume_s": ready - start,
                    # this process's CPU over the same span (every thread): what the resume
                    # costs on a busy machine, where the wall time mostly waits for a core
                    "cpu_s": cpu_s,
                    "process_s": time.time() - spawned_at,
                    "detail": peer.resume_detail,
                },
            )
        os._exit(0)

    await peer.start()
    await peer.resume(run_id, steps, probe)
    msg = f"{name}: resume returned without reaching step {steps + 1}"
    raise PeerUnavailableError(msg)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the child processes."""
    p = argparse.ArgumentParser(prog="python -m bench.child")
    p.add_argument("mode", choices=["measure", "crash", "resume"])
    p.add_argument("--peer", required=True)
    p.add_argument("--env", required=True, help="Env as JSON")
    p.add_argument("--params", help="Params as JSON (measure)")
    p.add_argument("--namespace", default="resume")
    p.add_argument("--run-id", default=RESUME_RUN)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--marks", default="")
    p.add_argument("--spawned-at", type=float, default=0.0)
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args(argv)
    # Debug logs of every step would cost the measured systems time they do not spend in use.
    configure_logging("WARNING")
    logging.getLogger().setLevel(logging.WARNING)
    env = Env.from_json(json.loads(a.env))
    try:
        if a.mode == "measure":
            params = Params.from_json(json.loads(a.params))
            asyncio.run(measure(a.peer, env, params, a.out))
        elif a.mode == "crash":
            marks = [int(m) for m in a.marks.split(",") if m]
            asyncio.run(crash(a.peer, env, run_id=a.run_id, steps=a.steps, marks=marks, out=a.out))
        else:
            asyncio.run(
                resume(
                    a.peer, env, run_id=a.run_id, steps=a.steps, spawned_at=a.spawned_at, out=a.out
                )
            )
    except Exception as e:
        if not a.out.exists():
            _write(a.out, {"error": f"{type(e).__name__}: {e}"})
        raise


if __name__ == "__main__":
    main()
