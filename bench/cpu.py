"""CPU seconds used so far by another process (Linux /proc) and by redis-server (INFO cpu)."""

from __future__ import annotations

import os
from pathlib import Path

from agentledger.views.redis_store import RedisViewStore

_TICKS = os.sysconf("SC_CLK_TCK")


async def redis_cpu_seconds(store: RedisViewStore) -> float:
    """User + system CPU seconds redis-server has used so far (its main thread and children)."""
    info = await store.client.info("cpu")
    return sum(float(info[k]) for k in ("used_cpu_sys", "used_cpu_user"))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS
