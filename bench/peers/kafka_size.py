"""Bytes a set of Kafka topics holds: the on-disk size of their log segments under the local
stack's ``log.dirs`` (segments are appended in place, so file sizes are the bytes written)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from agentledger.stack import StackPaths
from bench.peers.base import Env, PeerUnavailableError


def kafka_data_dir(env: Env) -> Path:
    """The local stack's Kafka ``log.dirs``; only known when the bench runs on the local stack."""
    if env.state_dir is None:
        msg = "Kafka is external (AGENTLEDGER_KAFKA_BOOTSTRAP): its segment sizes are not visible"
        raise PeerUnavailableError(msg)
    data = StackPaths(Path(env.state_dir).resolve()).kafka_data
    if not data.is_dir():
        msg = f"no Kafka data dir at {data}"
        raise PeerUnavailableError(msg)
    return data


def segment_bytes(data_dir: Path, topics: Iterable[str]) -> int:
    """Sum of ``*.log`` sizes in the partition directories ``<topic>-<n>`` of ``topics``."""
    wanted = set(topics)
    pattern = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
    total = 0
    for part_dir in data_dir.iterdir():
        m = pattern.match(part_dir.name)
        if m is None or m["topic"] not in wanted or not part_dir.is_dir():
            continue
        total += sum(f.stat().st_size for f in part_dir.glob("*.log"))
    return total


def topic_bytes(env: Env, topics: Iterable[str]) -> int:
    """On-disk segment bytes of ``topics`` on the local stack's broker."""
    return segment_bytes(kafka_data_dir(env), topics)
