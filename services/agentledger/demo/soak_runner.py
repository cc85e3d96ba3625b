"""``agentledger soak``: many kill-and-resume trials in a row, judged by the provider's effects.

Trials go in batches on a namespace of their own (topics ``soak-….``, Redis keys ``soak-…``).
For each trial of a batch a brand-new worker process runs the trial's refund runs and SIGKILLs
itself at the trial's kill point; then the namespace's Redis keys are wiped, ONE brand-new
process resumes every run of the batch, and each trial is checked on its own: its runs' views
folded from Kafka against an uninterrupted in-memory run of the same seed, and the sandbox's
``GET /v1/effects`` for duplicates and losses. The logs of failed trials are kept.
"""

from __future__ import annotations

import shutil
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from agentledger._core.settings import WorkerSettings
from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.demo.plan import Reference, reference, verify
from agentledger.demo.runner import (
    TIMED_OUT,
    default_prefix,
    flush_redis,
    performed_effects,
    provider_url,
    read_views,
    spawn_forked,
    worker_command,
)
from agentledger.demo.soak import (
    SOAK_POINTS,
    SoakReport,
    TrialOutcome,
    TrialPlan,
    judge,
    pick_hit,
    plan_trials,
)
from agentledger.events.topics import topic_specs

Progress = Callable[[int, int, int], None]


@dataclass(frozen=True)
class SoakOptions:
    """What ``agentledger soak`` was asked to do."""

    trials: int = 10
    kill_at: str = "all"
    seed: int = 1
    runs_per_trial: int = 2
    batch: int = 10
    provider_url: str | None = None
    run_prefix: str | None = None
    #: A worker process still running after this long is killed and its trials fail: a hung
    #: worker must fail the soak, not hang it.
    worker_timeout_s: float = 300.0


@dataclass(frozen=True)
class KilledTrial:
    """A trial whose worker has run to its kill: its reference, hit and log."""

    plan: TrialPlan
    ref: Reference
    hit: int
    of: int
    exit_code: int
    log: Path


async def _kill_one(
    settings: WorkerSettings,
    plan: TrialPlan,
    url: str,
    producer: str,
    logs: Path,
    *,
    timeout_s: float,
) -> KilledTrial:
    """Run one trial's worker until it SIGKILLs itself at the trial's kill point."""
    ref = await reference(plan.run_ids, plan.seed)
    point = SOAK_POINTS[plan.point]
    of = ref.hits.get(point, 0)
    hit = pick_hit(plan, of)
    command = worker_command(
        settings, [(r, plan.seed) for r in plan.run_ids], url=url, producer=producer,
        kill=(point, hit), concurrency=4,
    )  # fmt: skip
    log = logs / f"trial-{plan.index:05d}.kill.log"
    code, _ = await spawn_forked(command, log, timeout_s=timeout_s)
    return KilledTrial(plan, ref, hit, of, code, log)


async def _batch(
    settings: WorkerSettings,
    plans: Sequence[TrialPlan],
    url: str,
    logs: Path,
    number: int,
    *,
    timeout_s: float,
) -> list[TrialOutcome]:
    """Kill every trial of the batch, wipe the namespace's keys, resume all, judge each."""
    producer = f"{settings.key_prefix}-b{number:05d}"
    killed = [
        await _kill_one(settings, plan, url, producer, logs, timeout_s=timeout_s) for plan in plans
    ]
    await flush_redis(settings, "namespace")
    targets = [(r, k.plan.seed) for k in killed for r in k.plan.run_ids]
    resume_log = logs / f"batch-{number:05d}.resume.log"
    command = worker_command(
        settings, targets, url=url, producer=producer, kill=None, concurrency=16
    )
    resume_code, _ = await spawn_forked(command, resume_log, timeout_s=timeout_s)
    views = await read_views(settings, [r for r, _ in targets])
    performed = await performed_effects(url)
    outcomes = []
    for k in killed:
        report = verify(k.ref, {r: views.get(r) for r in k.plan.run_ids}, performed)
        if resume_code == TIMED_OUT:
            report.mismatches.append(f"the resuming worker did not exit within {timeout_s} s")
        elif resume_code != 0:
            report.mismatches.append(f"the resuming worker exited with {resume_code}")
        outcome = judge(
            k.plan, report, hit=k.hit, of=k.of, exit_code=k.exit_code, killed_code=-signal.SIGKILL
        )
        outcomes.append(outcome)
    keep_failed_logs(killed, outcomes, resume_log)
    return outcomes


def keep_failed_logs(
    killed: Sequence[KilledTrial], outcomes: Sequence[TrialOutcome], resume_log: Path
) -> None:
    """Delete the logs of passed trials; keep a failed trial's and its batch's resume log."""
    failed = False
    for k, outcome in zip(killed, outcomes, strict=True):
        if outcome.ok:
            for path in (k.log, k.log.with_suffix(".out")):
                path.unlink(missing_ok=True)
        else:
            failed = True
    if not failed:
        for path in (resume_log, resume_log.with_suffix(".out")):
            path.unlink(missing_ok=True)


async def run_soak(
    settings: WorkerSettings, options: SoakOptions, progress: Progress | None = None
) -> SoakReport:
    """The whole soak; ``settings`` must carry resolved endpoints (their namespace is unused)."""
    started = time.monotonic()
    stamp = options.run_prefix or default_prefix().replace("demo-", "soak-", 1)
    plans = plan_trials(
        options.trials, options.kill_at, options.seed,
        runs_per_trial=options.runs_per_trial, prefix=stamp,
    )  # fmt: skip
    soak = settings.model_copy(update={"topic_prefix": f"{stamp}.", "key_prefix": stamp})
    logs = settings.state_dir.resolve() / "soak" / stamp
    logs.mkdir(parents=True, exist_ok=True)
    specs = topic_specs(soak)
    await ensure_topics(soak, specs)
    report = SoakReport(details={"seed": options.seed, "run_prefix": stamp, "logs": str(logs)})
    async with provider_url(soak, options.provider_url, stamp) as url:
        size = max(options.batch, 1)
        for number, first in enumerate(range(0, len(plans), size)):
            batch = plans[first : first + size]
            timeout_s = options.worker_timeout_s
            report.outcomes += await _batch(soak, batch, url, logs, number, timeout_s=timeout_s)
            if progress is not None:
                progress(len(report.outcomes), len(plans), len(report.failures()))
    report.details["elapsed_s"] = round(time.monotonic() - started, 1)
    if report.ok:
        # Nothing to investigate: leave no topics, keys or files behind.
        await delete_topics(soak, [spec.name for spec in specs])
        await flush_redis(soak, "namespace")
        shutil.rmtree(logs, ignore_errors=True)
        for path in (soak.state_dir.resolve() / "demo").glob(f"{stamp}.sandbox.db*"):
            path.unlink(missing_ok=True)
        report.details["logs"] = "removed (no trial failed)"
    return report
