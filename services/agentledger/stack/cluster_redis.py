"""The Redis part of the cluster stack: the hook stack.cluster calls to start Redis nodes.

Contract with stack.cluster (the Kafka side does not look inside):

- ``ensure_redis(paths, previous)`` starts whatever of the Redis part is not running, reusing
  the live processes of ``previous`` (the records it returned last time), and returns a
  :class:`RedisPart`: one :class:`ClusterProcess` per process (role, port, markers, pid) and
  the ``AGENTLEDGER_REDIS_*`` variables clients need (URL, CA file, cluster flag).
- ``stack down`` stops the returned processes by their pid, start time and markers, and
  ``stack status`` lists them; nothing else is needed for them to be managed.

The part is a Redis Cluster of 3 primaries and 3 replicas (``stack.redis_cluster``) under
``<state>/cluster/redis``, TLS only with the cluster stack's certificates (``stack.certs``),
one ACL user whose password is kept in that directory (0600).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import structlog

from agentledger.stack.certs import ensure_certificates
from agentledger.stack.cluster_config import ClusterPaths
from agentledger.stack.cluster_state import ClusterProcess
from agentledger.stack.redis_cluster import ClusterState, roles, start_cluster, tls_of
from agentledger.stack.redis_server import find_redis_server, redis_version

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class RedisPart:
    """What the Redis part runs, and the variables that point clients at it."""

    processes: tuple[ClusterProcess, ...]
    env: dict[str, str] = field(default_factory=dict)


async def ensure_redis(paths: ClusterPaths, previous: tuple[ClusterProcess, ...]) -> RedisPart:
    """Reuse the live Redis Cluster of the cluster stack or start it (see the module docstring).

    ``previous`` is not needed: the cluster's own record (``<state>/cluster/redis``) names the
    nodes, and a cluster missing a node is started afresh (views are rebuilt from the log).
    """
    del previous
    version = await redis_version(await find_redis_server())
    tls = tls_of(ensure_certificates(paths.certs))
    state = await start_cluster(paths.redis_dir(), tls=tls)
    now = datetime.now(UTC)
    live = await roles(state)
    processes = tuple(
        ClusterProcess(
            name=f"redis-{node.index}",
            role=f"redis {live.get(node.index, 'node')}",
            port=node.port,
            ports={"tls": node.port, "bus": node.bus_port},
            markers=node.markers(),
            pid=node.pid,
            proc_start=node.start_ticks,
            started_at=now,
            version=version,
        )
        for node in state.nodes
    )
    log.info("stack_cluster_redis_ready", nodes=[p.port for p in processes])
    return RedisPart(processes, cluster_env(state))


def cluster_env(state: ClusterState) -> dict[str, str]:
    """The variables clients set: URL with the ACL user's password, CA file, cluster flag."""
    return state.env()
