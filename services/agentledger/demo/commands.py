"""``agentledger demo`` (the README's main job) and the demo's worker process ``demo-worker``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from agentledger._core.settings import WorkerSettings
from agentledger.demo.plan import KILL_AT, render
from agentledger.demo.runner import DemoOptions, flush_mode, run_demo
from agentledger.demo.soak import ALL, SOAK_POINTS, progress_bar, render_soak
from agentledger.demo.soak_runner import SoakOptions, run_soak
from agentledger.demo.taskdump import dump_tasks_on_signal
from agentledger.demo.worker import parse_targets, work
from agentledger.stack.resolve import resolve_settings

EXIT_FAILED = 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo`` and the hidden ``demo-worker``."""
    demo = subparsers.add_parser(
        "demo",
        help="run the refund agent, SIGKILL its worker, wipe Redis, resume, verify every effect",
        description=(
            "Runs --runs refund-agent runs on the local stack against a sandbox provider. With "
            "--kill-at the worker process SIGKILLs itself at the chosen point (hit picked by "
            "--seed); Redis is then flushed (FLUSHALL of the embedded stack's Redis; a Redis "
            "named by AGENTLEDGER_REDIS_URL only with --flush all or --flush namespace) and every "
            "run is "
            "resumed in a brand-new process. Exits 1 if an effect was performed twice or never, "
            "or if an outcome or the cost differs from an uninterrupted run of the same seed."
        ),
    )
    demo.add_argument("--runs", type=int, default=5, help="how many runs (default 5)")
    demo.add_argument("--kill-at", choices=sorted(KILL_AT), default=None)
    demo.add_argument("--seed", type=int, default=1, help="picks the orders and the kill hit")
    demo.add_argument(
        "--no-resume",
        action="store_true",
        help="stop after the kill and leave the runs to the fleet and the reconciler",
    )
    demo.add_argument("--run-prefix", default=None, help="run ids <prefix>-000 … (default unique)")
    demo.add_argument("--provider-url", default=None, help="a sandbox-compatible provider")
    demo.add_argument(
        "--flush",
        choices=("all", "namespace", "none"),
        default=None,
        help=(
            "after the kill: FLUSHALL, delete only this deployment's key prefix, or keep Redis; "
            "default: all on the embedded stack; a Redis named by AGENTLEDGER_REDIS_URL needs "
            "this flag"
        ),
    )
    demo.add_argument("--concurrency", type=int, default=16, help="runs in flight per worker")
    demo.add_argument("--json", action="store_true", help="print the report as one JSON object")
    demo.set_defaults(run=_demo)

    soak = subparsers.add_parser(
        "soak",
        help="repeat kill-and-resume trials across every kill point; exit 1 on any failure",
        description=(
            "Each trial runs --runs-per-trial refund runs in a worker that SIGKILLs itself at "
            "one kill point (--kill-at all cycles through every point; the hit is picked by the "
            "trial's seed, derived from --seed). The namespace's Redis keys are then wiped and a "
            "brand-new process resumes the runs. The sandbox provider's own effect list is the "
            "judge: prints a table of trials, duplicates, lost effects and cost differences by "
            "kill point, keeps the logs of failed trials, exits 1 on any failure."
        ),
    )
    soak.add_argument("--trials", type=int, default=10, help="how many trials (default 10)")
    soak.add_argument("--kill-at", choices=(ALL, *SOAK_POINTS), default=ALL)
    soak.add_argument("--seed", type=int, default=1, help="derives every trial's seed")
    soak.add_argument("--runs-per-trial", type=int, default=2, help="runs per trial (default 2)")
    soak.add_argument(
        "--batch", type=int, default=10, help="trials resumed together by one process"
    )
    soak.add_argument("--provider-url", default=None, help="a sandbox-compatible provider")
    soak.add_argument(
        "--worker-timeout-s",
        type=float,
        default=300.0,
        help="a worker still running after this long is killed and its trials fail (300)",
    )
    soak.add_argument("--run-prefix", default=None, help="run ids <prefix>-t00000-0 … (unique)")
    soak.add_argument("--json", action="store_true", help="print the report as one JSON object")
    soak.set_defaults(run=_soak)

    child = subparsers.add_parser("demo-worker")
    child.add_argument("--kafka-bootstrap", required=True)
    child.add_argument("--redis-url", required=True)
    child.add_argument("--topic-prefix", required=True)
    child.add_argument("--key-prefix", required=True)
    child.add_argument("--run-partitions", type=int, required=True)
    child.add_argument("--state-dir", type=Path, required=True)
    child.add_argument("--provider-url", required=True)
    child.add_argument("--seed", type=int, required=True)
    child.add_argument("--transactional-id", required=True)
    child.add_argument("--concurrency", type=int, default=16)
    child.add_argument("--kill-point", default=None)
    child.add_argument("--kill-hit", type=int, default=1)
    child.add_argument(
        "--use-views", action="store_true", help="resume from the projector's views if caught up"
    )
    child.add_argument(
        "--barrier-s", type=float, default=0.0, help="wait for the projector on resume (s)"
    )
    child.add_argument(
        "--checkpoints",
        choices=["each_step", "with_next_commit"],
        default="each_step",
        help="commit each step's checkpoint at once, or with the run's next durable write",
    )
    child.add_argument("targets", nargs="+", metavar="RUN_ID[@SEED]")
    child.set_defaults(run=_demo_worker)


async def _demo(args: argparse.Namespace) -> int:
    given = WorkerSettings()
    settings = await resolve_settings(given)
    options = DemoOptions(
        runs=args.runs,
        kill_at=args.kill_at,
        seed=args.seed,
        resume=not args.no_resume,
        run_prefix=args.run_prefix,
        provider_url=args.provider_url,
        flush=flush_mode(
            args.flush, redis_given=given.redis_url is not None, killing=args.kill_at is not None
        ),
        concurrency=args.concurrency,
    )
    report = await run_demo(settings, options)
    if args.json:
        sys.stdout.write(json.dumps(report.as_json(), sort_keys=True) + "\n")
    else:
        sys.stdout.write(render(report) + "\n")
    return 0 if report.ok else EXIT_FAILED


async def _soak(args: argparse.Namespace) -> int:
    settings = await resolve_settings(WorkerSettings())
    options = SoakOptions(
        trials=args.trials,
        kill_at=args.kill_at,
        seed=args.seed,
        runs_per_trial=args.runs_per_trial,
        batch=args.batch,
        provider_url=args.provider_url,
        run_prefix=args.run_prefix,
        worker_timeout_s=args.worker_timeout_s,
    )
    tty = sys.stderr.isatty()

    def progress(done: int, total: int, failed: int) -> None:
        sys.stderr.write(("\r" if tty else "") + progress_bar(done, total, failed))
        sys.stderr.write("" if tty and done < total else "\n")
        sys.stderr.flush()

    report = await run_soak(settings, options, progress)
    if args.json:
        sys.stdout.write(json.dumps(report.as_json(), sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_soak(report) + "\n")
    return 0 if report.ok else EXIT_FAILED


async def _demo_worker(args: argparse.Namespace) -> int:
    dump_tasks_on_signal(asyncio.get_running_loop())
    settings = WorkerSettings(
        kafka_bootstrap=args.kafka_bootstrap,
        redis_url=args.redis_url,
        topic_prefix=args.topic_prefix,
        key_prefix=args.key_prefix,
        run_partitions=args.run_partitions,
        state_dir=args.state_dir,
        transactional_id=args.transactional_id,
        kill_point=args.kill_point,
        kill_hit=args.kill_hit,
        use_views=args.use_views,
        resume_barrier_s=args.barrier_s,
        checkpoints=args.checkpoints,
    )
    outcome = await work(
        settings,
        parse_targets(args.targets, args.seed),
        provider_url=args.provider_url,
        concurrency=args.concurrency,
    )
    sys.stdout.write(json.dumps(outcome, sort_keys=True) + "\n")
    return 0 if all(not v.startswith("error") for v in outcome.values()) else EXIT_FAILED
