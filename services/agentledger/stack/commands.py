"""``agentledger stack up|down|status|env|restart-kafka|fetch-jars``: the local stack's CLI."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentledger.settings import CommonSettings
from agentledger.stack.jars import ensure_jars
from agentledger.stack.local import LocalStack
from agentledger.stack.resolve import resolve_endpoints
from agentledger.stack.state import StackStatus

EXIT_NOT_RUNNING = 1


def _settings(args: argparse.Namespace) -> CommonSettings:
    """Settings from the environment, with --state-dir taking precedence."""
    if args.state_dir is not None:
        return CommonSettings(state_dir=args.state_dir)
    return CommonSettings()


def _stack(args: argparse.Namespace) -> LocalStack:
    return LocalStack(_settings(args).state_dir, keep_running=True)


def _write(lines: list[str]) -> None:
    sys.stdout.write("".join(f"{line}\n" for line in lines))


async def _up(args: argparse.Namespace) -> int:
    report = await _stack(args).up()
    _write(report.endpoints.env_lines())
    return 0


async def _down(args: argparse.Namespace) -> int:
    report = await _stack(args).down()
    lines = [f"stopped {name}" for name in report.stopped]
    lines += [f"{name} was not running (record cleared)" for name in report.already_gone]
    _write(lines or ["nothing was running"])
    return 0


def _status_json(status: StackStatus) -> dict[str, Any]:
    def one(c: Any) -> dict[str, Any]:
        return {
            "health": c.health.value,
            "endpoint": c.endpoint,
            "pid": c.pid,
            "started_at": c.started_at.isoformat() if c.started_at else None,
            "version": c.version,
        }

    return {
        "state_dir": str(status.state_dir),
        "running": status.running,
        "kafka": one(status.kafka),
        "redis": one(status.redis),
    }


async def _status(args: argparse.Namespace) -> int:
    status = await _stack(args).status()
    if args.json:
        _write([json.dumps(_status_json(status), indent=2)])
    else:
        _write(status.lines())
    return 0 if status.running else EXIT_NOT_RUNNING


async def _env(args: argparse.Namespace) -> int:
    endpoints = await resolve_endpoints(_settings(args))
    _write(endpoints.env_lines())
    return 0


async def _restart_kafka(args: argparse.Namespace) -> int:
    endpoints = await _stack(args).restart_kafka()
    _write(endpoints.env_lines())
    return 0


async def _fetch_jars(args: argparse.Namespace) -> int:
    stack = _stack(args)
    jars = await ensure_jars(stack.paths)
    verb = "fetched" if jars.fetched else "verified"
    size_mb = jars.manifest.total_bytes / 1e6
    _write([f"{verb} {len(jars.manifest.jars)} jars ({size_mb:.1f} MB) in {stack.paths.jars}"])
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``stack`` and its subcommands."""
    stack = subparsers.add_parser(
        "stack",
        help="the embedded local Kafka + Redis",
        description="A real single-node Kafka (KRaft) and Redis on 127.0.0.1, free ports, data "
        "under the state dir (AGENTLEDGER_STATE_DIR, default .agentledger/).",
    )
    sub = stack.add_subparsers(dest="stack_command", required=True, metavar="ACTION")
    commands = {
        "up": (_up, "start (or reuse) Kafka and Redis; print their env lines"),
        "down": (_down, "stop exactly the processes `up` started"),
        "status": (_status, "what runs, where, since when (exit 1 unless both run)"),
        "env": (_env, "print AGENTLEDGER_KAFKA_BOOTSTRAP/REDIS_URL lines for eval"),
        "restart-kafka": (_restart_kafka, "stop the broker and start it on the same port/data"),
        "fetch-jars": (_fetch_jars, "download (or verify) the Kafka jar set only"),
    }
    for name, (handler, text) in commands.items():
        parser = sub.add_parser(name, help=text, description=text)
        parser.add_argument(
            "--state-dir", type=Path, default=None, help="overrides AGENTLEDGER_STATE_DIR"
        )
        if name == "status":
            parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.set_defaults(run=handler)
