"""``agentledger demo``: run the refund agent, SIGKILL its worker, wipe Redis, resume, verify."""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from agentledger._core.settings import WorkerSettings
from agentledger._core.writer import Checkpoints
from agentledger.bus.admin import ensure_topics
from agentledger.bus.reading import RunReader
from agentledger.demo.plan import (
    Performed,
    Reference,
    Report,
    kill_target,
    reference,
    run_ids,
    verify,
)
from agentledger.demo.taskdump import DUMP_SIGNAL
from agentledger.errors import ConfigurationError
from agentledger.events.codec import EventCodec
from agentledger.events.topics import TopicNames, topic_specs
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.redisclient import redis_client
from agentledger.views import RunView, fold

Flush = Literal["all", "namespace", "none"]


@dataclass(frozen=True)
class DemoOptions:
    """What ``agentledger demo`` was asked to do."""

    runs: int = 5
    kill_at: str | None = None
    seed: int = 1
    resume: bool = True
    run_prefix: str | None = None
    provider_url: str | None = None
    flush: Flush = "none"
    concurrency: int = 16


def flush_mode(requested: Flush | None, *, redis_given: bool, killing: bool) -> Flush:
    """How the demo wipes Redis before resuming; it never wipes a Redis it did not start unasked.

    Without a kill there is nothing to wipe. After a kill, the embedded stack's Redis is
    flushed (FLUSHALL); a Redis named by ``AGENTLEDGER_REDIS_URL`` is someone's, so the demo
    refuses unless ``--flush all`` or ``--flush namespace`` says which keys may go.
    """
    if requested is not None:
        return requested
    if not killing:
        return "none"
    if redis_given:
        msg = (
            "the demo wipes Redis after the kill, and AGENTLEDGER_REDIS_URL names a Redis it did "
            "not start: pass --flush namespace (this key prefix only) or --flush all (FLUSHALL)"
        )
        raise ConfigurationError(msg)
    return "all"


def default_prefix() -> str:
    """A run-id prefix unique to this invocation."""
    return f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"


@contextlib.asynccontextmanager
async def provider_url(
    settings: WorkerSettings, given: str | None, name: str
) -> AsyncIterator[str]:
    """The provider to use: ``given``, or a sandbox process started for the demo."""
    if given is not None:
        yield given
        return
    db = settings.state_dir.resolve() / "demo" / f"{name}.sandbox.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    async with SandboxProcess(db) as sandbox:
        yield sandbox.url


def worker_command(
    settings: WorkerSettings,
    targets: Sequence[tuple[str, int]],
    *,
    url: str,
    producer: str,
    kill: tuple[str, int] | None,
    concurrency: int,
    use_views: bool = False,
    checkpoints: Checkpoints = "each_step",
) -> list[str]:
    """The command line of one demo worker process (a brand-new interpreter)."""
    if settings.kafka_bootstrap is None or settings.redis_url is None:
        raise ConfigurationError("resolve the endpoints before starting demo workers")
    cmd = [
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", "demo-worker",
        "--kafka-bootstrap", settings.kafka_bootstrap,
        "--redis-url", settings.redis_url,
        "--topic-prefix", settings.topic_prefix,
        "--key-prefix", settings.key_prefix,
        "--run-partitions", str(settings.run_partitions),
        "--state-dir", str(settings.state_dir),
        "--provider-url", url,
        "--seed", "0",
        "--transactional-id", producer,
        "--concurrency", str(concurrency),
    ]  # fmt: skip
    if kill is not None:
        cmd += ["--kill-point", kill[0], "--kill-hit", str(kill[1])]
    if use_views:
        cmd += ["--use-views", "--barrier-s", "20"]
    if checkpoints != "each_step":
        cmd += ["--checkpoints", checkpoints]
    return [*cmd, "--", *(f"{run_id}@{seed}" for run_id, seed in targets)]


async def spawn_worker(command: list[str], log_path: Path) -> tuple[int, str]:
    """Run one worker process to its end (or its SIGKILL); return its exit code and stdout."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=log
        )
        out, _ = await proc.communicate()
    return proc.returncode if proc.returncode is not None else -1, out.decode(errors="replace")


# Modules a forked demo worker needs, imported once by the fork server instead of per process.
_PRELOAD = (
    "agentledger.cli",
    "agentledger.demo.commands",
    "agentledger._core.ports",
    "agentledger.providers.http",
)


def _forked_main(argv: list[str], log_path: str, out_path: str) -> None:
    """Body of a forked worker: stdout to ``out_path``, stderr to ``log_path``, then the CLI."""
    with open(log_path, "ab") as log, open(out_path, "wb") as out:
        os.dup2(log.fileno(), 2)
        os.dup2(out.fileno(), 1)
    from agentledger.cli import run  # noqa: PLC0415 - preloaded by the fork server

    code = run(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


#: How long a timed-out worker gets to write its task dump before the SIGKILL.
_DUMP_WAIT_S = 5.0

#: The exit code :func:`spawn_forked` reports for a child it killed after ``timeout_s``.
TIMED_OUT = 124


async def spawn_forked(
    command: list[str], log_path: Path, *, timeout_s: float | None = None
) -> tuple[int, str]:
    """Like :func:`spawn_worker`, but forked from a fork server that preloaded agentledger.

    The child is still a new process (own pid, no connection, loop or state of the parent or
    of earlier children); only the interpreter start and imports (seconds on a busy 2-core
    machine) are saved. Chaos tests use it to keep 20 seeds per kill point affordable. A child
    still running after ``timeout_s`` is SIGKILLed and reported as :data:`TIMED_OUT`.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(_PRELOAD))
    argv = command[command.index("agentledger.cli") + 1 :]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    out_path = log_path.with_suffix(".out")
    process = context.Process(target=_forked_main, args=(argv, str(log_path), str(out_path)))
    process.start()
    await asyncio.to_thread(process.join, timeout_s)
    timed_out = process.exitcode is None
    if timed_out and process.pid is not None:
        # Ask the worker where it hangs (its log keeps every task's await chain), then kill it.
        os.kill(process.pid, DUMP_SIGNAL)
        await asyncio.to_thread(process.join, _DUMP_WAIT_S)
    if timed_out:
        process.kill()
        await asyncio.to_thread(process.join)
    code = TIMED_OUT if timed_out else process.exitcode if process.exitcode is not None else -1
    process.close()
    out = out_path.read_text(errors="replace") if out_path.exists() else ""
    return code, out


async def flush_redis(settings: WorkerSettings, mode: Flush) -> str:
    """Wipe Redis as a cold machine would find it: FLUSHALL, only this key prefix, or not."""
    if mode == "none":
        return "none"
    if settings.redis_url is None:
        raise ConfigurationError("no redis_url to flush")
    client = redis_client(settings.redis_url, settings=settings)
    try:
        if mode == "all":
            await client.flushall()
            return "FLUSHALL"
        keys = [k async for k in client.scan_iter(match=f"{settings.key_prefix}:*", count=1000)]
        for start in range(0, len(keys), 500):
            await client.delete(*keys[start : start + 500])
        return f"deleted {len(keys)} keys {settings.key_prefix}:*"
    finally:
        await client.aclose()


async def read_views(settings: WorkerSettings, ids: Sequence[str]) -> dict[str, RunView | None]:
    """Each run's view folded from Kafka (read_committed), None for a run with no events."""
    if settings.kafka_bootstrap is None:
        raise ConfigurationError("no kafka_bootstrap to read from")
    reader = RunReader(
        settings.kafka_bootstrap,
        TopicNames(settings.topic_prefix).run_topics,
        EventCodec(),
        connect_timeout_ms=settings.kafka_connect_timeout_ms,
        read_timeout_ms=settings.kafka_publish_timeout_ms,
        settings=settings,
        outage_budget_s=settings.outage_budget_s,
    )
    views: dict[str, RunView | None] = {}
    try:
        for run_id in ids:
            events = await reader.read_run(run_id, settings.run_partitions)
            views[run_id] = fold(RunView(run_id=run_id), events).view if events else None
    finally:
        await reader.stop()
    return views


async def performed_effects(url: str) -> list[Performed]:
    """What the sandbox says it performed."""
    async with SandboxClient(url) as client:
        effects = await client.effects()
    return [
        Performed(
            e.idempotency_key,
            e.kind,
            str(e.payload["order_id"]) if "order_id" in e.payload else None,
        )
        for e in effects
    ]


async def run_demo(settings: WorkerSettings, options: DemoOptions) -> Report:
    """The whole demo; ``settings`` must carry resolved endpoints."""
    started = time.monotonic()
    await ensure_topics(settings, topic_specs(settings))
    prefix = options.run_prefix or default_prefix()
    ids = run_ids(prefix, options.runs)
    ref: Reference = await reference(ids, options.seed)
    kill = kill_target(options.kill_at, options.seed, ref.hits) if options.kill_at else None
    logs = settings.state_dir.resolve() / "demo"
    producer = f"agentledger-demo-{prefix}"
    details: dict[str, object] = {"run_prefix": prefix, "seed": options.seed}
    async with provider_url(settings, options.provider_url, prefix) as url:
        details["provider_url"] = url

        def command(k: tuple[str, int] | None) -> list[str]:
            return worker_command(
                settings, [(i, options.seed) for i in ids], url=url, producer=producer, kill=k,
                concurrency=options.concurrency,
            )  # fmt: skip

        t0 = time.monotonic()
        code, out = await spawn_worker(command(kill), logs / f"{prefix}.first.log")
        details["first_process_s"] = round(time.monotonic() - t0, 2)
        details["kill"] = {
            "at": options.kill_at,
            "point": kill[0] if kill else None,
            "hit": kill[1] if kill else None,
            "of": ref.hits.get(kill[0], 0) if kill else None,
            "killed": code == -signal.SIGKILL,
            "exit": code,
        }
        if not options.resume:
            details["left_for_fleet"] = list(ids)
            details["total_s"] = round(time.monotonic() - started, 2)
            return Report(runs=len(ids), details=details, verified=False)
        details["flush"] = await flush_redis(settings, options.flush)
        t1 = time.monotonic()
        code, out = await spawn_worker(command(None), logs / f"{prefix}.resume.log")
        details["resume_process_s"] = round(time.monotonic() - t1, 2)
        details["resume_exit"] = code
        with contextlib.suppress(ValueError):
            details["resumed"] = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
        views = await read_views(settings, ids)
        performed = await performed_effects(url)
    report = verify(ref, views, performed)
    details["total_s"] = round(time.monotonic() - started, 2)
    report.details = details
    if code != 0:
        report.mismatches.append(f"the resuming worker exited with {code} (see {logs})")
    return report
