"""``agentledger stack up|down|status|env|restart-kafka|fetch-jars``: the local stack's CLI."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentledger.settings import CommonSettings
from agentledger.stack.cluster import ClusterStack
from agentledger.stack.cluster_state import export_lines
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


def _cluster(args: argparse.Namespace) -> ClusterStack:
    return ClusterStack(_settings(args).state_dir)


async def _up(args: argparse.Namespace) -> int:
    if args.cluster:
        cluster = _cluster(args)
        _write(export_lines(cluster.env(await cluster.up())))
        return 0
    report = await _stack(args).up()
    _write(report.endpoints.env_lines())
    return 0


async def _down(args: argparse.Namespace) -> int:
    report = await _stack(args).down()
    lines = [f"stopped {name}" for name in report.stopped]
    lines += [f"stopped {name} (cluster)" for name in await _cluster(args).down()]
    lines += [f"{name} was not running (record cleared)" for name in report.already_gone]
    _write(lines or ["nothing was running"])
    return 0


def _processes(status: StackStatus) -> list[dict[str, Any]]:
    """The single-node stack's processes, in the same shape as the cluster stack's rows."""
    roles = {"kafka": "kafka broker+controller", "redis": "redis"}
    rows = []
    for c in (status.kafka, status.redis):
        port = int(c.endpoint.rsplit(":", 1)[1].split("/")[0]) if c.endpoint else None
        rows.append(
            {
                "stack": "single",
                "name": c.name,
                "role": roles[c.name],
                "port": port,
                "pid": c.pid if c.health.value != "stopped" else None,
                "health": c.health.value,
                "version": c.version,
            }
        )
    return rows


def _status_json(status: StackStatus, cluster: list[dict[str, Any]]) -> dict[str, Any]:
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
        "processes": [*_processes(status), *cluster],
    }


async def _status(args: argparse.Namespace) -> int:
    status = await _stack(args).status()
    cluster = await _cluster(args).status()
    if args.json:
        _write([json.dumps(_status_json(status, cluster), indent=2)])
    else:
        _write(status.lines())
        _write([_cluster_line(row) for row in cluster])
    cluster_runs = bool(cluster) and all(row["health"] == "running" for row in cluster)
    return 0 if status.running or cluster_runs else EXIT_NOT_RUNNING


def _cluster_line(row: dict[str, Any]) -> str:
    pid = f"  pid {row['pid']}" if row["pid"] is not None else ""
    return f"{row['name']:<12} {row['health']:<9} 127.0.0.1:{row['port']}  {row['role']}{pid}"


async def _env(args: argparse.Namespace) -> int:
    if args.cluster:
        cluster = _cluster(args)
        _write(export_lines(cluster.env(await cluster.up())))
        return 0
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
        "down": (_down, "stop exactly the processes `up` started (the cluster stack's too)"),
        "status": (_status, "what runs, where, since when (exit 1 unless a whole stack runs)"),
        "env": (_env, "print AGENTLEDGER_* export lines for eval"),
        "restart-kafka": (_restart_kafka, "stop the broker and start it on the same port/data"),
        "fetch-jars": (_fetch_jars, "download (or verify) the Kafka jar set only"),
    }
    for name, (handler, text) in commands.items():
        parser = sub.add_parser(name, help=text, description=text)
        parser.add_argument(
            "--state-dir", type=Path, default=None, help="overrides AGENTLEDGER_STATE_DIR"
        )
        if name in {"up", "env"}:
            parser.add_argument(
                "--cluster",
                action="store_true",
                help="the production-shaped stack: 3 Kafka brokers (KRaft) and the Redis part",
            )
        if name == "status":
            parser.add_argument("--json", action="store_true", help="machine-readable output")
        parser.set_defaults(run=handler)
