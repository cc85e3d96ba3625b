"""CLI: ``agentledger worker`` and ``agentledger runs`` (submit, list, show, approve, reject,
fork, skip-record)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
from typing import Any

from agentledger._core.gc_tuning import tune_collector
from agentledger.bus.publisher import KafkaPublisher
from agentledger.errors import ConfigurationError
from agentledger.events.models import Decision
from agentledger.fleet.agent import agent_name, load_agent
from agentledger.fleet.approvals import decide_as_operator
from agentledger.fleet.fork import fork_run
from agentledger.fleet.listing import render_list, render_show, run_detail, run_summary
from agentledger.fleet.settings import FleetSettings
from agentledger.fleet.skip import skip_record
from agentledger.fleet.submit import requester, submit_run
from agentledger.fleet.wiring import RunLookup, operator
from agentledger.fleet.worker import FleetWorker
from agentledger.stack.resolve import resolve_settings
from agentledger.views.keys import STATUSES

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration_s(text: str) -> float:
    """``90``, ``90s``, ``15m``, ``2h``, ``1d``, ``500ms`` -> seconds."""
    match = _DURATION.match(text)
    if match is None:
        msg = f"duration {text!r}: use a number with an optional unit ms, s, m, h or d (e.g. 15m)"
        raise ConfigurationError(msg)
    return float(match.group(1)) * _UNIT_S[match.group(2) or "s"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``worker`` and ``runs``."""
    worker = subparsers.add_parser(
        "worker",
        help="run a fleet worker: consume run requests, run up to N runs at once",
        description="Joins the consumer group of the agent on the requests topic and starts or "
        "resumes the runs it is asked for, holding a fenced lease on each. Stops on SIGTERM.",
    )
    worker.add_argument("--agent", required=True, help="MODULE:FACTORY building the Agent")
    worker.add_argument("--concurrency", type=int, default=None, help="runs at once (16)")
    worker.set_defaults(run=_worker)

    runs = subparsers.add_parser("runs", help="submit, inspect, approve and fork runs")
    sub = runs.add_subparsers(dest="runs_command", required=True, metavar="ACTION")
    submit = sub.add_parser("submit", help="ask the fleet to start a run (RunRequested)")
    submit.add_argument("--agent", required=True, help="agent name, or MODULE:FACTORY")
    submit.add_argument("--input", default="null", help="the run's input as JSON")
    submit.add_argument("--run-id", default=None, help="default: <agent>-<random>")
    submit.add_argument("--json", action="store_true")
    submit.set_defaults(run=_submit)

    lst = sub.add_parser("list", help="runs with status, cursor, fence and owner")
    lst.add_argument("--status", choices=STATUSES, action="append", help="repeatable")
    lst.add_argument("--limit", type=int, default=1000)
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(run=_list)

    show = sub.add_parser("show", help="one run: steps, effects, budget, approvals")
    show.add_argument("run_id", metavar="RUN")
    show.add_argument("--json", action="store_true")
    show.set_defaults(run=_show)

    for action, help_text in (
        ("approve", "approve what a paused run asks for, and re-queue it"),
        ("reject", "reject what a paused run asks for; the run ends as rejected"),
    ):
        p = sub.add_parser(action, help=help_text)
        p.add_argument("run_id", metavar="RUN")
        p.add_argument("--approver", default=None, help="who decides (default: OS user)")
        p.add_argument("--note", default="")
        p.add_argument("--intent-hash", default=None, help="default: what the pause asks for")
        p.add_argument("--no-resume", action="store_true", help="record only, do not re-queue")
        if action == "approve":
            p.add_argument(
                "--expires-in", default=None, help="approval validity, e.g. 15m (default 1h)"
            )
        p.set_defaults(run=_decide, decision="approved" if action == "approve" else "rejected")

    skip = sub.add_parser(
        "skip-record",
        help="skip one undecodable record of a run's log (RecordSkipped) so it can be resumed",
    )
    skip.add_argument("run_id", metavar="RUN")
    skip.add_argument("--topic", required=True, help="the record's topic (see the dead letter)")
    skip.add_argument("--partition", type=int, required=True)
    skip.add_argument("--offset", type=int, required=True)
    skip.add_argument("--reason", required=True, help="why, for the audit trail")
    skip.set_defaults(run=_skip)

    fork = sub.add_parser("fork", help="a new run from a checkpoint of another")
    fork.add_argument("run_id", metavar="RUN")
    fork.add_argument("--from-step", type=int, required=True, help="last inherited step")
    fork.add_argument("--run-id", dest="new_run_id", default=None)
    fork.add_argument("--no-resume", action="store_true", help="do not ask the fleet to run it")
    fork.add_argument("--json", action="store_true")
    fork.set_defaults(run=_fork)


async def _settings(**overrides: Any) -> FleetSettings:
    settings = await resolve_settings(FleetSettings())
    return settings.model_copy(update=overrides) if overrides else settings


async def _worker(args: argparse.Namespace) -> int:
    overrides = {} if args.concurrency is None else {"fleet_concurrency": args.concurrency}
    settings = await _settings(**overrides)
    agent = load_agent(args.agent, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # the process is ours: once set up, what exists lives as long as it does (tune_collector)
    await FleetWorker(settings, agent).serve(stop, started=tune_collector)
    return 0


async def _submit(args: argparse.Namespace) -> int:
    settings = await _settings()
    try:
        value = json.loads(args.input)
    except json.JSONDecodeError as e:
        raise ConfigurationError(f"--input is not JSON: {e}") from e
    name = agent_name(args.agent, settings)
    async with KafkaPublisher(settings, client_id="agentledger-runs-submit") as publisher:
        request = await submit_run(publisher, name, value, run_id=args.run_id)
    if args.json:
        _print({"run_id": request.run_id, "agent": request.agent, "event_id": request.event_id})
    else:
        _print_text(request.run_id)
    return 0


async def _list(args: argparse.Namespace) -> int:
    settings = await _settings()
    rows = []
    async with RunLookup(settings) as lookup:
        for status in args.status or STATUSES:
            for run_id in await lookup.views.runs_by_status(status, limit=args.limit):
                view = await lookup.views.load(run_id)
                if view is not None:
                    rows.append(run_summary(view, await lookup.leases.current(run_id)))
        # "no runs" would be a lie when no projector ever wrote views under this prefix.
        unindexed = not rows and await lookup.views.live_namespace() is None
    rows.sort(key=lambda r: r["updated_at"], reverse=True)
    if args.json:
        _print(rows)
    elif unindexed:
        _print_text(
            f"no projector has indexed key prefix {settings.key_prefix!r}: runs may exist in "
            "Kafka (start `agentledger projector`, or run `agentledger views rebuild`)"
        )
    else:
        _print_text(render_list(rows))
    return 0


async def _show(args: argparse.Namespace) -> int:
    settings = await _settings()
    async with RunLookup(settings) as lookup:
        view, source = await lookup.view(args.run_id)
        if view is None:
            raise ConfigurationError(
                f"run {args.run_id} has no events (not in views, not in Kafka)"
            )
        detail = run_detail(view, await lookup.leases.current(args.run_id), source)
    if args.json:
        _print(detail)
    else:
        _print_text(render_show(detail))
    return 0


async def _decide(args: argparse.Namespace) -> int:
    decision: Decision = args.decision
    expires_in_s = _expires_in_s(args, decision)  # refused before anything is opened
    settings = await _settings()
    approver = args.approver or requester()
    event = await decide_as_operator(
        settings, args.run_id, decision, approver=approver,
        expires_in_s=expires_in_s,
        intent_hash=args.intent_hash, note=args.note, resume=not args.no_resume,
    )  # fmt: skip
    expires_at = event.expires_at
    _print_text(
        f"{args.run_id}: {decision} by {approver} (intent {event.intent_hash}, generation "
        f"{event.generation}"
        + (f", expires at {expires_at}" if expires_at else "")
        + ")"
        + ("" if args.no_resume else "; resume requested")
    )
    return 0


def _expires_in_s(args: argparse.Namespace, decision: Decision) -> float | None:
    expires_in = getattr(args, "expires_in", None) if decision == "approved" else None
    if expires_in is None:
        return None
    seconds = parse_duration_s(expires_in)
    if seconds <= 0:
        msg = f"--expires-in {expires_in}: an approval must stay valid for some time (e.g. 15m)"
        raise ConfigurationError(msg)
    return seconds


async def _skip(args: argparse.Namespace) -> int:
    settings = await _settings()
    async with KafkaPublisher(settings, client_id="agentledger-runs-skip") as publisher:
        skip = await skip_record(
            settings,
            publisher,
            args.run_id,
            topic=args.topic,
            partition=args.partition,
            offset=args.offset,
            reason=args.reason,
            skipped_by=requester(),
        )
    _print_text(
        f"skipped {skip.source_topic}:{skip.source_partition}@{skip.source_offset} of run "
        f"{skip.run_id} (event {skip.event_id}); the run can be resumed"
    )
    return 0


async def _fork(args: argparse.Namespace) -> int:
    settings = await _settings()
    async with operator(settings, f"fork-{requester()}") as op:
        view = await fork_run(
            op.ledger, args.run_id, args.from_step, run_id=args.new_run_id,
            resume=not args.no_resume, barrier=op.barrier,
        )  # fmt: skip
    if args.json:
        _print(run_detail(view, None, "new"))
    else:
        _print_text(
            f"{view.run_id}: fork of {args.run_id} at step {args.from_step} (generation "
            f"{view.generation}, resumes at step {view.cursor})"
        )
    return 0


def _print(value: Any) -> None:
    sys.stdout.write(json.dumps(value, sort_keys=True, default=str) + "\n")


def _print_text(text: str) -> None:
    sys.stdout.write(text + "\n")
