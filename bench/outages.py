"""``python -m bench.outages [--tries 5]``: the demo through a broker restart and a Redis SIGKILL.

Issue 19's "done when", measured on the embedded local stack (brought up as ``agentledger stack
up`` does, under ``AGENTLEDGER_STATE_DIR``): each try runs ``agentledger demo --runs 12
--concurrency 12 --json`` (a child process) against a fresh sandbox provider started here,
waits until the provider has performed its third effect (runs are in flight), then, by chaos:

- ``none``: nothing (the baseline of the same session);
- ``broker-restart``: what ``agentledger stack restart-kafka`` does (SIGTERM, the broker's own
  graceful shutdown, a start on the same port and data);
- ``redis-sigkill``: SIGKILL of the stack's Redis, then, 3 s later, what ``agentledger stack
  up`` does (Redis starts on the same port and its AOF).

The chaos is done in this process (``LocalStack``, the code behind those two commands): on a
loaded machine a new ``agentledger`` interpreter takes seconds to start, and the runs would be
over before the broker went down. While it lasts, the dependency's port is probed every 50 ms:
``down-s`` is how long it refused connections, ``effects-at-down`` what the provider had
performed when it began to.

A try passes when the demo exits 0 with 0 duplicate, 0 lost and 0 unexpected effects and no
mismatch (the sandbox provider's own effect list is the judge), the port went down while
effects were still to be performed, and the demo's first worker process performed them and
finished every run itself (exit 0): it rode the outage out. ``wait-s`` is what that process
logged as waited (``dependency_back waited_s=``; a call blocked inside aiokafka for less than
its publish timeout logs nothing, so a broker restart often shows ``-``). Prints one row per
chaos and exits 1 unless every try passed; the demo's logs stay under ``<state dir>/demo``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentledger.demo.runner import performed_effects
from agentledger.netprobe import accepts
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.settings import CommonSettings
from agentledger.stack.local import LocalStack

CHAOS = ("none", "broker-restart", "redis-sigkill")
DEPENDENCY = {"broker-restart": "Kafka", "redis-sigkill": "Redis"}
REDIS_DOWN_S = 3.0
DEMO_TIMEOUT_S = 600.0
PROBE_S = 0.05
_WAITED = re.compile(r"waited_s=([0-9.]+)")


@dataclass
class Try:
    """One demo run through one chaos."""

    chaos: str
    exit: int | None = None
    ok: bool = False
    duplicates: int = 0
    lost: int = 0
    unexpected: int = 0
    finished: int = 0
    runs: int = 0
    effects_expected: int = 0
    effects_at_chaos: int = 0
    effects_at_down: int | None = None
    first_exit: int | None = None
    first_process_s: float | None = None
    logged_wait: bool = False
    waited_s: float | None = None
    down_s: float | None = None
    down_after_s: float | None = None
    total_s: float = 0.0
    load_1m: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """The demo passed, and its first worker rode the outage out and finished every run."""
        return self.exit == 0 and self.ok and not self.problems


@dataclass
class Down:
    """When the probed port refused connections, and what the provider had performed then."""

    at: float | None = None
    back: float | None = None
    effects: int | None = None


async def probe(
    host: str, port: int, done: asyncio.Event, effects: Callable[[], Awaitable[int]]
) -> Down:
    """Probe ``host:port`` until ``done`` (and it answers again, if it went down)."""
    down = Down()
    while True:
        up = await accepts(host, port)
        if not up and down.at is None:
            down.at = time.monotonic()
            down.effects = await effects()
        elif up and down.at is not None:
            down.back = time.monotonic()
            return down
        if up and done.is_set():
            return down
        await asyncio.sleep(PROBE_S)


def endpoint_of(stack: LocalStack, chaos: str) -> tuple[str, int]:
    """The host and port the chaos takes down."""
    endpoints = stack.endpoints_from(stack.load())
    if chaos == "redis-sigkill":
        url = urlsplit(endpoints.redis_url)
        return url.hostname or "127.0.0.1", url.port or 6379
    host, _, port = endpoints.kafka_bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


async def chaos_now(chaos: str, stack: LocalStack) -> None:
    """Do ``chaos`` to the local stack; returns once the dependency has been started again."""
    if chaos == "broker-restart":
        await stack.restart_kafka()  # agentledger stack restart-kafka
    elif chaos == "redis-sigkill":
        if not await stack.kill_redis():
            msg = "the local stack's Redis was not running"
            raise RuntimeError(msg)
        await asyncio.sleep(REDIS_DOWN_S)
        await stack.up()  # agentledger stack up


async def take_down(
    chaos: str, stack: LocalStack, effects: Callable[[], Awaitable[int]], result: Try
) -> None:
    """Do the chaos while probing the dependency's port; note the outage in ``result``."""
    done = asyncio.Event()
    host, port = endpoint_of(stack, chaos)
    started = time.monotonic()
    watching = asyncio.ensure_future(probe(host, port, done, effects))
    try:
        await chaos_now(chaos, stack)
    finally:
        done.set()
    down = await asyncio.wait_for(watching, 60)
    result.effects_at_down = down.effects
    if down.at is not None:
        result.down_after_s = round(down.at - started, 1)
        if down.back is not None:
            result.down_s = round(down.back - down.at, 1)


async def one_try(chaos: str, stack: LocalStack, *, runs: int, concurrency: int, work: Path) -> Try:
    """One demo against a fresh sandbox, with ``chaos`` once the third effect was performed."""
    result = Try(chaos=chaos)
    started = time.monotonic()
    async with SandboxProcess(work / f"{chaos}-{time.monotonic_ns()}.db") as sandbox:
        command = cli("demo", "--runs", str(runs), "--concurrency", str(concurrency), "--json")
        demo = await asyncio.create_subprocess_exec(
            *command,
            "--provider-url",
            sandbox.url,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        output = asyncio.ensure_future(demo.communicate())

        async def effects() -> int:
            return len(await performed_effects(sandbox.url))

        while not output.done() and result.effects_at_chaos < 3:
            result.effects_at_chaos = await effects()
            await asyncio.sleep(0.02)
        if chaos != "none":
            if output.done():
                result.problems.append("the demo had finished before the chaos")
            else:
                await take_down(chaos, stack, effects, result)
        try:
            out, err = await asyncio.wait_for(output, DEMO_TIMEOUT_S)
        except TimeoutError:
            demo.kill()
            out, err = await demo.communicate()
            result.problems.append(f"the demo ran longer than {DEMO_TIMEOUT_S:.0f} s")
    result.exit = demo.returncode
    result.total_s = round(time.monotonic() - started, 1)
    result.load_1m = round(os.getloadavg()[0], 2)
    report = read_report(result, out, err)
    if report is not None:
        logs = stack.paths.root.resolve() / "demo"
        read_worker_log(result, logs / f"{report['details']['run_prefix']}.first.log")
    return result


def cli(*args: str) -> list[str]:
    """An ``agentledger`` command line in this interpreter."""
    return [sys.executable, "-m", "agentledger.cli", *args]


def read_report(result: Try, out: bytes, err: bytes) -> dict[str, Any] | None:
    """Fill ``result`` from the demo's JSON report (None if it printed none)."""
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        report: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    except ValueError:
        report = {}
    if not report:
        result.problems.append("no report: " + err.decode(errors="replace").strip()[-300:])
        return None
    names = ("ok", "duplicates", "lost", "unexpected", "finished", "runs", "effects_expected")
    for name in names:
        setattr(result, name, report[name])
    result.problems += report["mismatches"]
    details = report["details"]
    result.first_exit = details["kill"]["exit"]
    result.first_process_s = details["first_process_s"]
    if result.first_exit != 0:
        result.problems.append(f"the first worker process exited {result.first_exit}")
    return report


def read_worker_log(result: Try, log: Path) -> None:
    """Whether the outage met runs in flight; what the demo's first worker logged waiting."""
    dependency = DEPENDENCY.get(result.chaos)
    if dependency is None:
        return
    text = log.read_text(errors="replace") if log.exists() else ""
    mine = [line for line in text.splitlines() if f"dependency={dependency}" in line]
    result.logged_wait = any("dependency_unreachable_waiting" in line for line in mine)
    waits = [float(m.group(1)) for line in mine if (m := _WAITED.search(line))]
    result.waited_s = max(waits) if waits else None
    if result.effects_at_down is None or result.effects_at_down >= result.effects_expected:
        result.problems.append(
            f"{dependency} did not go down while effects were still to be performed "
            f"(effects performed when it did: {result.effects_at_down})"
        )


def span(values: list[float]) -> str:
    """``a-b`` (or ``a``) of the values, 1 decimal; ``-`` when empty."""
    if not values:
        return "-"
    low, high = min(values), max(values)
    return f"{low:.1f}" if low == high else f"{low:.1f}-{high:.1f}"


def table(tries: list[Try]) -> str:
    """One row per chaos."""
    head = (
        "chaos", "tries", "passed", "duplicates", "lost", "first-process-done", "wait-s",
        "first-process-s", "down-s", "effects-at-down", "load-1m",
    )  # fmt: skip
    rows = [head]
    for chaos in dict.fromkeys(t.chaos for t in tries):
        mine = [t for t in tries if t.chaos == chaos]
        at_down = [t for t in mine if t.effects_at_down is not None]
        rows.append(
            (
                chaos,
                str(len(mine)),
                str(sum(t.passed for t in mine)),
                str(sum(t.duplicates for t in mine)),
                str(sum(t.lost for t in mine)),
                str(sum(t.first_exit == 0 for t in mine)),
                span([t.waited_s for t in mine if t.waited_s is not None]),
                span([t.first_process_s for t in mine if t.first_process_s is not None]),
                span([t.down_s for t in mine if t.down_s is not None]),
                ", ".join(f"{t.effects_at_down}/{t.effects_expected}" for t in at_down) or "-",
                span([t.load_1m for t in mine]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def write_json(path: Path, tries: list[Try]) -> None:
    """Every try, as a JSON list."""
    path.write_text(json.dumps([asdict(t) for t in tries], indent=2) + "\n")


async def measure(
    chaos: list[str], tries: int, *, runs: int, concurrency: int, json_out: Path | None
) -> int:
    """Every try of every chaos, in turn; the table on stdout; 0 if every try passed."""
    for name in ("AGENTLEDGER_KAFKA_BOOTSTRAP", "AGENTLEDGER_REDIS_URL"):
        if os.environ.get(name):
            sys.stderr.write(f"bench.outages: needs the embedded local stack; unset {name}\n")
            return 2
    stack = LocalStack(CommonSettings().state_dir, keep_running=True)
    await stack.up()
    results: list[Try] = []
    load_start = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="bench-outages-") as tmp:
        for name in chaos:
            for index in range(tries):
                result = await one_try(
                    name, stack, runs=runs, concurrency=concurrency, work=Path(tmp)
                )
                results.append(result)
                verdict = "passed" if result.passed else "FAILED: " + "; ".join(result.problems)
                sys.stderr.write(
                    f"{name} try {index + 1}/{tries}: exit {result.exit}, duplicates "
                    f"{result.duplicates}, lost {result.lost}, first process "
                    f"{result.first_process_s} s (exit {result.first_exit}, waited "
                    f"{result.waited_s} s), down {result.down_s} s from "
                    f"{result.down_after_s} s after the chaos began, at effect "
                    f"{result.effects_at_down} of {result.effects_expected}, load "
                    f"{result.load_1m}: {verdict}\n"
                )
                await stack.up()  # whatever a failed try left down
    sys.stdout.write(
        f"python -m bench.outages --tries {tries} (demo --runs {runs} --concurrency "
        f"{concurrency}; chaos after the provider's 3rd effect; load 1m {load_start} at start, "
        f"{round(os.getloadavg()[0], 2)} at end, {os.cpu_count()} CPUs)\n"
    )
    sys.stdout.write(table(results) + "\n")
    if json_out is not None:
        write_json(json_out, results)
    return 0 if all(t.passed for t in results) else 1


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and measure."""
    p = argparse.ArgumentParser(prog="python -m bench.outages", description=__doc__)
    p.add_argument("--tries", type=int, default=5, help="tries per chaos (default 5)")
    p.add_argument(
        "--chaos",
        default=",".join(CHAOS),
        help=f"comma-separated subset of: {', '.join(CHAOS)} (default: all, in that order)",
    )
    p.add_argument("--runs", type=int, default=12, help="demo --runs (default 12)")
    p.add_argument("--concurrency", type=int, default=12, help="demo --concurrency (default 12)")
    p.add_argument("--json", type=Path, help="write every try to this file")
    a = p.parse_args(argv)
    chaos = [x.strip() for x in a.chaos.split(",") if x.strip()]
    unknown = [x for x in chaos if x not in CHAOS]
    if unknown:
        p.error(f"unknown chaos: {', '.join(unknown)}")
    code = asyncio.run(
        measure(chaos, a.tries, runs=a.runs, concurrency=a.concurrency, json_out=a.json)
    )
    sys.exit(code)


if __name__ == "__main__":
    main()
