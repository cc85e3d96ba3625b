"""``agentledger topics ensure``: create every topic and report drift (exit 1 on drift)."""

from __future__ import annotations

import argparse
import json
import sys

from agentledger.bus.admin import ensure_topics
from agentledger.events.topics import topic_specs
from agentledger.settings import CommonSettings
from agentledger.stack.resolve import resolve_settings

EXIT_DRIFT = 1


async def _ensure(args: argparse.Namespace) -> int:
    settings = await resolve_settings(CommonSettings())
    report = await ensure_topics(settings, topic_specs(settings))
    lines = [json.dumps(report.to_dict(), indent=2)] if args.json else report.lines()
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    return EXIT_DRIFT if report.has_drift else 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``topics`` and its subcommands."""
    topics = subparsers.add_parser("topics", help="Kafka topics of agentledger")
    sub = topics.add_subparsers(dest="topics_command", required=True, metavar="ACTION")
    ensure = sub.add_parser(
        "ensure",
        help="create missing topics, report drift of existing ones (exit 1 on drift)",
        description="Create every topic with its partitions, replication factor, retention.ms "
        "and cleanup.policy from settings; existing topics are checked, never changed.",
    )
    ensure.add_argument("--json", action="store_true", help="machine-readable report")
    ensure.set_defaults(run=_ensure)
