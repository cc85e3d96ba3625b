"""The Redis part of the cluster stack: the hook stack.cluster calls to start Redis nodes.

Contract with stack.cluster (the Kafka side does not look inside):

- ``ensure_redis(paths, previous)`` starts whatever of the Redis part is not running, reusing
  the live processes of ``previous`` (the records it returned last time), and returns a
  :class:`RedisPart`: one :class:`ClusterProcess` per process (role, port, markers, pid) and
  the ``AGENTLEDGER_REDIS_*`` variables clients need (URL, CA file, cluster flag).
- ``stack down`` stops the returned processes by their pid, start time and markers, and
  ``stack status`` lists them; nothing else is needed for them to be managed.

Until the Redis Cluster (3 primaries, 3 replicas, TLS, ACL) lands here, the part is one
plaintext redis-server, so the cluster stack is usable end to end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from agentledger.errors import StackError
from agentledger.stack.cluster_config import ClusterPaths
from agentledger.stack.cluster_state import ClusterProcess
from agentledger.stack.config import StackPaths
from agentledger.stack.ports import free_ports
from agentledger.stack.procs import terminate
from agentledger.stack.redis_server import (
    find_redis_server,
    redis_markers,
    redis_version,
    start_redis,
    wait_redis_ready,
)

log = structlog.get_logger(__name__)

REDIS_STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class RedisPart:
    """What the Redis part runs, and the variables that point clients at it."""

    processes: tuple[ClusterProcess, ...]
    env: dict[str, str] = field(default_factory=dict)


async def ensure_redis(paths: ClusterPaths, previous: tuple[ClusterProcess, ...]) -> RedisPart:
    """Reuse the live Redis of the cluster stack or start it (see the module docstring)."""
    single = StackPaths(paths.root)  # its redis files: <state>/cluster/redis/
    rec = previous[0] if previous else None
    if rec is not None and rec.pid is not None and rec.proc_start is not None and rec.is_running():
        try:
            await wait_redis_ready(single, rec.pid, rec.proc_start, rec.port, 30.0)
        except StackError:
            await terminate(rec.pid, rec.proc_start, rec.markers, grace=REDIS_STOP_GRACE_S)
        else:
            return RedisPart((rec,), _env(rec.port))
    exe = await find_redis_server()
    version = await redis_version(exe)
    [port] = free_ports([rec.port if rec else None])
    pid, ticks = start_redis(single, exe, port)
    markers = redis_markers(single, port)
    new = ClusterProcess(
        name=f"redis-{port}",
        role="redis",
        port=port,
        ports={"client": port},
        markers=markers,
        pid=pid,
        proc_start=ticks,
        started_at=datetime.now(UTC),
        version=version,
    )
    try:
        await wait_redis_ready(single, pid, ticks, port)
    except BaseException:
        await terminate(pid, ticks, markers, grace=REDIS_STOP_GRACE_S)
        raise
    log.info("stack_cluster_redis_started", pid=pid, port=port)
    return RedisPart((new,), _env(port))


def _env(port: int) -> dict[str, str]:
    return {"AGENTLEDGER_REDIS_URL": f"redis://127.0.0.1:{port}/0"}
