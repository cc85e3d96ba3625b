"""Pure rendering of the cluster stack's Kafka side: paths, broker properties, command lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentledger.stack.certs import Certificates, kafka_ssl_properties
from agentledger.stack.config import (
    KAFKA_MAIN,
    STORAGE_TOOL_MAIN,
    StackPaths,
    kafka_classpath,
    kraft_node_properties,
)

BROKERS = 3
NODE_IDS: tuple[int, ...] = tuple(range(1, BROKERS + 1))
# Three JVMs share a small machine: a smaller heap than the single node's.
CLUSTER_JVM_HEAP = ("-Xms128m", "-Xmx384m")
CLIENT_LISTENER = "CLIENT"
INTERNAL_LISTENER = "INTERNAL"
CONTROLLER_LISTENER = "CONTROLLER"
# The mechanism brokers use between themselves; clients may use any of CLIENT_MECHANISMS.
INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
SCRAM_MECHANISMS: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512")
CLIENT_MECHANISMS: tuple[str, ...] = (*SCRAM_MECHANISMS, "PLAIN")
CLIENT_USER = "agentledger"
BROKER_USER = "broker"
MIN_INSYNC = 2


@dataclass(frozen=True)
class BrokerPorts:
    """The three loopback ports of one combined broker+controller node."""

    client: int
    internal: int
    controller: int


@dataclass(frozen=True)
class Credentials:
    """The SCRAM/PLAIN users created when the storage is formatted."""

    client_password: str
    broker_password: str


@dataclass(frozen=True)
class ClusterPaths:
    """Where every file of the cluster stack lives, under ``<state dir>/cluster``."""

    state_root: Path

    @property
    def single(self) -> StackPaths:
        """The single-node stack's paths: the jar set and the lock are shared with it."""
        return StackPaths(self.state_root)

    @property
    def root(self) -> Path:
        """The cluster stack's own directory."""
        return self.state_root / "cluster"

    @property
    def state_file(self) -> Path:
        """The JSON record of every process of the cluster stack."""
        return self.root / "cluster.json"

    @property
    def secrets_file(self) -> Path:
        """The generated passwords (mode 0600)."""
        return self.root / "secrets.json"

    @property
    def certs(self) -> Path:
        """The CA and the node certificates."""
        return self.root / "certs"

    def broker_dir(self, node_id: int) -> Path:
        """One broker's directory (config, data, log)."""
        return self.root / f"kafka-{node_id}"

    def server_properties(self, node_id: int) -> Path:
        """A broker's config; its absolute path marks the broker in /proc/<pid>/cmdline."""
        return self.broker_dir(node_id) / "server.properties"

    def broker_data(self, node_id: int) -> Path:
        """A broker's log.dirs."""
        return self.broker_dir(node_id) / "data"

    def broker_log(self, node_id: int) -> Path:
        """A broker's stdout and stderr."""
        return self.broker_dir(node_id) / "kafka.log"

    @property
    def log4j(self) -> Path:
        """The brokers' log4j2 config."""
        return self.root / "log4j2.properties"

    @property
    def tool_log4j(self) -> Path:
        """A quieter log4j2 config for the storage tool."""
        return self.root / "log4j2-tools.properties"

    def redis_dir(self) -> Path:
        """Where the cluster stack's Redis part keeps its files."""
        return self.root / "redis"


def voters(ports: dict[int, BrokerPorts]) -> str:
    """``controller.quorum.voters``: every node is a voter (a static quorum of three)."""
    return ",".join(f"{n}@127.0.0.1:{ports[n].controller}" for n in sorted(ports))


def _jaas(module: str, **options: str) -> str:
    pairs = "".join(f' {key}="{value}"' for key, value in options.items())
    return f"org.apache.kafka.common.security.{module} required{pairs};"


def security_properties(certs: Certificates, creds: Credentials) -> dict[str, str | int]:
    """SASL_SSL for clients, SASL_SSL between brokers, mutual TLS towards the controllers."""
    client = CLIENT_LISTENER.lower()
    internal = INTERNAL_LISTENER.lower()
    props: dict[str, str | int] = {
        **kafka_ssl_properties(certs, client_auth="none"),
        "listener.security.protocol.map": (
            f"{CLIENT_LISTENER}:SASL_SSL,{INTERNAL_LISTENER}:SASL_SSL,{CONTROLLER_LISTENER}:SSL"
        ),
        # Only a node with a certificate of our CA may speak to the controllers.
        f"listener.name.{CONTROLLER_LISTENER.lower()}.ssl.client.auth": "required",
        "sasl.mechanism.inter.broker.protocol": INTER_BROKER_MECHANISM,
        f"listener.name.{internal}.sasl.enabled.mechanisms": INTER_BROKER_MECHANISM,
        f"listener.name.{internal}.{INTER_BROKER_MECHANISM.lower()}.sasl.jaas.config": _jaas(
            "scram.ScramLoginModule", username=BROKER_USER, password=creds.broker_password
        ),
        f"listener.name.{client}.sasl.enabled.mechanisms": ",".join(CLIENT_MECHANISMS),
        f"listener.name.{client}.plain.sasl.jaas.config": _jaas(
            "plain.PlainLoginModule", **{f"user_{CLIENT_USER}": creds.client_password}
        ),
    }
    for mechanism in SCRAM_MECHANISMS:
        # SCRAM users live in the cluster metadata; the server side needs only the module.
        key = f"listener.name.{client}.{mechanism.lower()}.sasl.jaas.config"
        props[key] = _jaas("scram.ScramLoginModule")
    return props


def broker_properties(
    node_id: int,
    ports: dict[int, BrokerPorts],
    data_dir: Path,
    security: dict[str, str | int] | None,
) -> dict[str, str | int]:
    """One combined broker+controller of the three-node cluster; plaintext when no security."""
    mine = ports[node_id]
    listeners = (
        f"{CLIENT_LISTENER}://127.0.0.1:{mine.client},"
        f"{INTERNAL_LISTENER}://127.0.0.1:{mine.internal},"
        f"{CONTROLLER_LISTENER}://127.0.0.1:{mine.controller}"
    )
    props: dict[str, str | int] = {
        **kraft_node_properties(
            node_id=node_id,
            quorum=("controller.quorum.voters", voters(ports)),
            listeners=listeners,
            names=(CONTROLLER_LISTENER, INTERNAL_LISTENER),
            protocol_map=(
                f"{CLIENT_LISTENER}:PLAINTEXT,{INTERNAL_LISTENER}:PLAINTEXT,"
                f"{CONTROLLER_LISTENER}:PLAINTEXT"
            ),
            data_dir=data_dir,
            replicas=(BROKERS, MIN_INSYNC),
        ),
        # A SIGKILLed node leaves the ISR within seconds, not the default 30 s, so writes with
        # acks=all go on with the two others instead of waiting for it.
        "replica.lag.time.max.ms": 5000,
        "broker.session.timeout.ms": 6000,
        "broker.heartbeat.interval.ms": 1000,
        "controller.quorum.fetch.timeout.ms": 2000,
        "controller.quorum.election.timeout.ms": 1000,
        "unclean.leader.election.enable": "false",
        "num.replica.fetchers": 1,
        "background.threads": 2,
        "log.cleaner.threads": 1,
        "log.cleaner.dedupe.buffer.size": 8388608,
    }
    if security is not None:
        props.update(security)
    return props


def cluster_jvm_options(paths: ClusterPaths, node_id: int, log4j: Path) -> list[str]:
    """Small-heap, few-thread JVM flags for one node (three share two cores)."""
    return [
        *CLUSTER_JVM_HEAP,
        "-XX:+UseSerialGC",
        "-XX:CICompilerCount=2",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        f"-Dkafka.logs.dir={paths.broker_dir(node_id)}",
        "-cp",
        kafka_classpath(paths.single),
    ]


def cluster_broker_command(paths: ClusterPaths, node_id: int) -> list[str]:
    """A node's argv; the absolute server.properties path identifies it later."""
    options = cluster_jvm_options(paths, node_id, paths.log4j)
    return ["java", *options, KAFKA_MAIN, str(paths.server_properties(node_id))]


def scram_arguments(creds: Credentials) -> list[str]:
    """``--add-scram`` arguments: the client user for both SCRAM mechanisms, the broker user."""
    args: list[str] = []
    for mechanism in SCRAM_MECHANISMS:
        user = f"[name={CLIENT_USER},password={creds.client_password}]"
        args += ["--add-scram", f"{mechanism}={user}"]
    args += [
        "--add-scram",
        f"{INTER_BROKER_MECHANISM}=[name={BROKER_USER},password={creds.broker_password}]",
    ]
    return args


def cluster_format_command(
    paths: ClusterPaths, node_id: int, cluster_id: str, creds: Credentials | None
) -> list[str]:
    """The storage tool's argv for one node of a static quorum (SCRAM users when secured)."""
    options = cluster_jvm_options(paths, node_id, paths.tool_log4j)
    argv = [
        "java",
        *options,
        STORAGE_TOOL_MAIN,
        "format",
        "--ignore-formatted",
        "-t",
        cluster_id,
        "-c",
        str(paths.server_properties(node_id)),
    ]
    return argv + (scram_arguments(creds) if creds is not None else [])
