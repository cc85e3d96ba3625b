"""A local Redis Cluster: 3 primaries + 3 replicas of Debian's redis-server on loopback.

Every node requires the ACL user ``agentledger`` (the default user is off), replicas
authenticate with it (masteruser/masterauth), and with TLS files the nodes listen on TLS only
(``port 0``, ``tls-port``, ``tls-cluster yes``, ``tls-replication yes``). The cluster is formed
with ``redis-cli --cluster create ... --cluster-replicas 1``. State (ports, pids, password) is
kept in ``<root>/cluster.json`` (mode 0600) so ``down`` stops exactly what ``up`` started.
``agentledger stack up --cluster`` starts it beside the Kafka brokers (``stack.cluster_redis``,
root ``<state>/cluster/redis``, TLS from ``stack.certs``);
``python -m agentledger.stack.redis_cluster up|env|status|down --root DIR`` runs it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shlex
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from agentledger.errors import StackError
from agentledger.redisclient import redis_options
from agentledger.stack.certs import Certificates, ensure_certificates
from agentledger.stack.config import redis_conf_lines
from agentledger.stack.ports import free_ports
from agentledger.stack.procs import is_alive, is_ours, kill_now, log_tail, spawn_detached, terminate
from agentledger.stack.redis_server import answers_ping, find_redis_server, run_short

USER = "agentledger"
NODES = 6
READY_TIMEOUT_S = 60.0
#: Short so that a killed primary's replica takes over within seconds (chaos tests).
NODE_TIMEOUT_MS = 2000


@dataclass(frozen=True)
class ClusterTls:
    """The PEM files the nodes serve TLS with (a CA and one server certificate/key)."""

    ca_file: Path
    cert_file: Path
    key_file: Path


def tls_of(certs: Certificates) -> ClusterTls:
    """The TLS files of the nodes from stack.certs' material (one server certificate for all)."""
    return ClusterTls(certs.ca_cert, certs.server_cert, certs.server_key)


@dataclass
class NodeRecord:
    """One redis-server of the cluster as started."""

    index: int
    port: int
    bus_port: int
    pid: int
    start_ticks: int

    def markers(self) -> tuple[str, ...]:
        """What the node's /proc cmdline shows: its config path or its retitled name."""
        return (f"node-{self.index}/redis.conf", f"127.0.0.1:{self.port}")


@dataclass
class ClusterState:
    """What ``up`` started and how clients reach it."""

    root_dir: str
    password: str
    nodes: list[NodeRecord] = field(default_factory=list)
    tls: dict[str, str] | None = None

    @property
    def root(self) -> Path:
        """The cluster's directory."""
        return Path(self.root_dir)

    @property
    def url(self) -> str:
        """A client URL naming the first node (cluster clients discover the rest)."""
        scheme = "rediss" if self.tls else "redis"
        return f"{scheme}://{USER}:{self.password}@127.0.0.1:{self.nodes[0].port}/0"

    def env(self) -> dict[str, str]:
        """The settings a client needs (password and CA path included)."""
        found = {"AGENTLEDGER_REDIS_URL": self.url, "AGENTLEDGER_REDIS_CLUSTER": "true"}
        if self.tls:
            found["AGENTLEDGER_REDIS_SSL_CAFILE"] = self.tls["ca_file"]
        return found

    def node_client(self, node: NodeRecord) -> Redis:
        """A plain client to one node (for roles and failover checks)."""
        extra: dict[str, Any] = {}
        if self.tls:
            extra = {"ssl": True, "ssl_ca_certs": self.tls["ca_file"]}
        return Redis(
            host="127.0.0.1",
            port=node.port,
            username=USER,
            password=self.password,
            socket_timeout=2.0,
            socket_connect_timeout=2.0,
            **extra,
            **redis_options(None),
        )


def _absolute(path: Path) -> Path:
    return path.resolve()


def _forget(root: Path) -> None:
    _state_file(_absolute(root)).unlink(missing_ok=True)


def _state_file(root: Path) -> Path:
    return root / "cluster.json"


def load_state(root: Path) -> ClusterState | None:
    """The recorded cluster under ``root``, or None."""
    path = _state_file(_absolute(root))
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    nodes = [NodeRecord(**n) for n in data.pop("nodes")]
    return ClusterState(nodes=nodes, **data)


def _save(state: ClusterState) -> None:
    path = _state_file(state.root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(asdict(state), out, indent=1)
    tmp.replace(path)


def render_node_conf(
    node_dir: Path, port: int, bus_port: int, password: str, tls: ClusterTls | None
) -> str:
    """redis.conf of one cluster node: loopback, ACL user only, TLS-only when given files."""
    lines = [
        *redis_conf_lines(node_dir),
        "cluster-enabled yes",
        'cluster-config-file "nodes.conf"',
        f"cluster-node-timeout {NODE_TIMEOUT_MS}",
        f"cluster-port {bus_port}",
        # a replica takes over however long it was cut off: there is no other copy
        "cluster-replica-validity-factor 0",
        "user default off",
        f"user {USER} on >{password} ~* &* +@all",
        f"masteruser {USER}",
        f"masterauth {password}",
    ]
    if tls is None:
        lines.append(f"port {port}")
    else:
        lines += [
            "port 0",
            f"tls-port {port}",
            f'tls-cert-file "{tls.cert_file}"',
            f'tls-key-file "{tls.key_file}"',
            f'tls-ca-cert-file "{tls.ca_file}"',
            "tls-auth-clients no",
            "tls-cluster yes",
            "tls-replication yes",
        ]
    return "\n".join(lines) + "\n"


def _cli_flags(state: ClusterState) -> list[str]:
    flags = ["--user", USER, "--pass", state.password, "--no-auth-warning"]
    if state.tls:
        flags += ["--tls", "--cacert", state.tls["ca_file"]]
    return flags


async def _answers(state: ClusterState, node: NodeRecord) -> bool:
    return await answers_ping(state.node_client(node))


async def _wait(state: ClusterState, check: Any, what: str, limit_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while loop.time() < deadline:
        for node in state.nodes:
            if not is_alive(node.pid, node.start_ticks):
                log = state.root / f"node-{node.index}" / "redis.log"
                msg = f"redis-server of cluster node {node.index} exited:\n{log_tail(log)}"
                raise StackError(msg)
        if await check():
            return
        await asyncio.sleep(0.1)
    msg = f"the Redis Cluster did not {what} within {limit_s:.0f}s"
    raise StackError(msg)


async def cluster_ok(state: ClusterState) -> bool:
    """Whether every live node reports cluster_state:ok and all 16384 slots are served."""
    for node in state.nodes:
        if not is_alive(node.pid, node.start_ticks):
            continue
        client = state.node_client(node)
        try:
            info = await client.cluster("INFO")
        except (RedisError, OSError):
            return False
        finally:
            await client.aclose()
        fields = info if isinstance(info, dict) else {}
        if fields.get("cluster_state") != "ok" or int(fields.get("cluster_slots_ok", 0)) != 16384:
            return False
    return True


def _fresh_node_dir(node_dir: Path) -> None:
    """An empty node directory: no cluster config nor data of an earlier cluster."""
    if node_dir.exists():
        shutil.rmtree(node_dir)
    node_dir.mkdir(parents=True)


async def start_cluster(root: Path, *, tls: ClusterTls | None = None) -> ClusterState:
    """Start the six nodes under ``root`` and form the cluster (a live recorded one is kept)."""
    root = _absolute(root)
    existing = load_state(root)
    if existing is not None and await _reusable(existing, tls):
        return existing
    if existing is not None:
        await stop_cluster(root)
    server = await find_redis_server()
    ports = free_ports([None] * (2 * NODES))
    state = ClusterState(
        root_dir=str(root),
        password=secrets.token_urlsafe(18),
        tls=None if tls is None else {k: str(v) for k, v in asdict(tls).items()},
    )
    for index in range(NODES):
        node_dir = root / f"node-{index}"
        _fresh_node_dir(node_dir)
        port, bus = ports[2 * index], ports[2 * index + 1]
        conf = node_dir / "redis.conf"
        conf.write_text(render_node_conf(node_dir, port, bus, state.password, tls))
        conf.chmod(0o600)
        pid, ticks = spawn_detached([server, str(conf)], node_dir / "redis.log")
        state.nodes.append(NodeRecord(index, port, bus, pid, ticks))
        _save(state)

    async def all_answer() -> bool:
        return all([await _answers(state, n) for n in state.nodes])

    await _wait(state, all_answer, "answer PING", READY_TIMEOUT_S)
    addresses = [f"127.0.0.1:{n.port}" for n in state.nodes]
    code, out = await run_short(
        "redis-cli",
        *_cli_flags(state),
        "--cluster",
        "create",
        *addresses,
        "--cluster-replicas",
        "1",
        "--cluster-yes",
        limit_s=READY_TIMEOUT_S,
    )
    if code != 0:
        msg = f"redis-cli --cluster create failed (exit {code}):\n{out[-2000:]}"
        raise StackError(msg)
    await _wait(state, lambda: cluster_ok(state), "serve every slot", READY_TIMEOUT_S)
    return state


async def _reusable(state: ClusterState, tls: ClusterTls | None) -> bool:
    """Whether every recorded node runs, with the asked TLS, and the cluster serves all slots."""
    wanted = None if tls is None else {k: str(v) for k, v in asdict(tls).items()}
    if state.tls != wanted or len(state.nodes) != NODES:
        return False
    if not all(is_ours(n.pid, n.start_ticks, n.markers()) for n in state.nodes):
        return False
    return await cluster_ok(state)


async def restart_node(state: ClusterState, index: int) -> NodeRecord:
    """Start node ``index`` again from its config (after a chaos test killed it)."""
    node = state.nodes[index]
    if is_alive(node.pid, node.start_ticks):
        return node
    server = await find_redis_server()
    node_dir = state.root / f"node-{index}"
    pid, ticks = spawn_detached([server, str(node_dir / "redis.conf")], node_dir / "redis.log")
    state.nodes[index] = NodeRecord(index, node.port, node.bus_port, pid, ticks)
    _save(state)
    return state.nodes[index]


def kill_node(state: ClusterState, index: int) -> bool:
    """SIGKILL node ``index`` (chaos tests); False if it was not ours or not alive."""
    node = state.nodes[index]
    return kill_now(node.pid, node.start_ticks, node.markers())


async def roles(state: ClusterState) -> dict[int, str]:
    """``primary`` / ``replica`` of each live node, as it reports itself."""
    found: dict[int, str] = {}
    for node in state.nodes:
        if not is_alive(node.pid, node.start_ticks):
            continue
        client = state.node_client(node)
        try:
            info = await client.info("replication")
        except (RedisError, OSError):
            continue
        finally:
            await client.aclose()
        found[node.index] = "primary" if info.get("role") == "master" else "replica"
    return found


async def status(root: Path) -> list[dict[str, Any]]:
    """Every recorded node with its role (``down`` when not running), port and pid."""
    state = load_state(root)
    if state is None:
        return []
    live = await roles(state)
    return [
        {
            "name": f"redis-cluster-{n.index}",
            "role": f"redis-{live.get(n.index, 'down')}",
            "port": n.port,
            "pid": n.pid if is_alive(n.pid, n.start_ticks) else None,
        }
        for n in state.nodes
    ]


async def stop_cluster(root: Path) -> int:
    """Stop every node recorded under ``root`` (only ours: pid, start time and command match)."""
    state = load_state(root)
    if state is None:
        return 0
    stopped = 0
    for node in state.nodes:
        if is_ours(node.pid, node.start_ticks, node.markers()):
            stopped += await terminate(node.pid, node.start_ticks, node.markers(), grace=10.0)
    _forget(root)
    return stopped


def env_lines(state: ClusterState) -> list[str]:
    """``export VAR=value`` lines for a shell."""
    return [f"export {k}={shlex.quote(v)}" for k, v in state.env().items()]


def main(argv: list[str] | None = None) -> int:
    """``python -m agentledger.stack.redis_cluster up|env|status|down [--state-dir D]``."""
    parser = argparse.ArgumentParser(prog="python -m agentledger.stack.redis_cluster")
    parser.add_argument("action", choices=["up", "env", "status", "down"])
    parser.add_argument("--root", type=Path, default=Path(".agentledger/redis-cluster"))
    parser.add_argument("--tls", action="store_true", help="TLS only, certificates in ROOT/certs")
    args = parser.parse_args(argv)
    root: Path = args.root
    if args.action == "up":
        tls = tls_of(ensure_certificates(root / "certs")) if args.tls else None
        state = asyncio.run(start_cluster(root, tls=tls))
        print("\n".join(env_lines(state)))  # noqa: T201 - the command's output
    elif args.action == "env":
        found = load_state(root)
        if found is None:
            print("no Redis Cluster recorded", file=sys.stderr)  # noqa: T201
            return 1
        print("\n".join(env_lines(found)))  # noqa: T201
    elif args.action == "status":
        print(json.dumps(asyncio.run(status(root)), indent=1))  # noqa: T201
    else:
        print(f"stopped {asyncio.run(stop_cluster(root))} nodes")  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
