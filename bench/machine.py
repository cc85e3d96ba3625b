"""What the bench ran on and with: machine, versions of every measured system, git commit."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from agentledger.stack import KAFKA_VERSION
from bench.peers.base import Env

PACKAGES = (
    "agentledger",
    "aiokafka",
    "redis",
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "langgraph-checkpoint-redis",
    "dbos",
    "psycopg",
    "psycopg-binary",
)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return 0.0


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], capture_output=True, text=True, check=False, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip()


def _version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "not installed"


def _redis_version() -> str:
    try:
        out = subprocess.run(
            ["redis-server", "--version"], capture_output=True, text=True, check=False, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.split("v=")[1].split()[0] if "v=" in out.stdout else out.stdout.strip()


def describe_machine(env: Env) -> dict[str, Any]:
    """Machine, OS, versions and the commit of the working tree (with a dirty flag)."""
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    return {
        "machine": {
            "cpu": _cpu_model(),
            "cores": os.cpu_count(),
            "memory_gib": round(_mem_gib(), 1),
            "kernel": platform.release(),
            "python": platform.python_version(),
        },
        "versions": {
            **{p: _version(p) for p in PACKAGES},
            "kafka": KAFKA_VERSION,
            "redis-server": _redis_version(),
            "postgresql": env.pg_version or "not started",
        },
        "commit": _git("rev-parse", "HEAD"),
        "tree_dirty": dirty,
    }
