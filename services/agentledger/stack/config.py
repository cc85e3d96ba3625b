"""Pure rendering of the local stack's files: Maven pom, Kafka and Redis configs, command lines."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

KAFKA_VERSION = "4.1.1"
LOG4J_VERSION = "2.24.3"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

# Jars without which the broker cannot start or logs nothing; the manifest must list all of them.
REQUIRED_JARS: tuple[str, ...] = (
    f"kafka_2.13-{KAFKA_VERSION}.jar",
    f"kafka-clients-{KAFKA_VERSION}.jar",
    f"kafka-server-{KAFKA_VERSION}.jar",
    f"kafka-raft-{KAFKA_VERSION}.jar",
    f"kafka-metadata-{KAFKA_VERSION}.jar",
    f"kafka-storage-{KAFKA_VERSION}.jar",
    f"log4j-core-{LOG4J_VERSION}.jar",
    f"log4j-api-{LOG4J_VERSION}.jar",
    f"log4j-slf4j-impl-{LOG4J_VERSION}.jar",
)

KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"
JVM_HEAP = ("-Xms256m", "-Xmx512m")


@dataclass(frozen=True)
class KafkaPorts:
    """The two loopback ports of the single KRaft node."""

    broker: int
    controller: int


@dataclass(frozen=True)
class StackPaths:
    """Where every file of one local stack lives, all under one state directory."""

    root: Path

    @property
    def state_file(self) -> Path:
        """The JSON record of what runs (pids, ports, start times, versions)."""
        return self.root / "stack.json"

    @property
    def lock_file(self) -> Path:
        """Serialises up/down/restart between processes."""
        return self.root / "stack.lock"

    @property
    def holders(self) -> Path:
        """One file per live process inside a LocalStack context (see stack.holders)."""
        return self.root / "holders"

    @property
    def kafka(self) -> Path:
        """Kafka's own directory (jars, configs, data, log)."""
        return self.root / "kafka"

    @property
    def jars(self) -> Path:
        """The broker's classpath, copied from Maven."""
        return self.kafka / "lib"

    @property
    def jar_manifest(self) -> Path:
        """Names, sizes and sha256 of the jar set, written after a verified fetch."""
        return self.kafka / "jars.json"

    @property
    def pom(self) -> Path:
        """The throwaway pom Maven resolves the broker from."""
        return self.kafka / "pom.xml"

    @property
    def kafka_data(self) -> Path:
        """Kafka's log.dirs (KRaft metadata and topic data)."""
        return self.kafka / "data"

    @property
    def server_properties(self) -> Path:
        """The broker config; its absolute path also marks our broker in /proc/<pid>/cmdline."""
        return self.kafka / "server.properties"

    @property
    def log4j(self) -> Path:
        """The broker's log4j2 config."""
        return self.kafka / "log4j2.properties"

    @property
    def tool_log4j(self) -> Path:
        """A quieter log4j2 config for the storage tool."""
        return self.kafka / "log4j2-tools.properties"

    @property
    def kafka_log(self) -> Path:
        """The broker's stdout and stderr."""
        return self.kafka / "kafka.log"

    @property
    def redis(self) -> Path:
        """Redis's directory (config, AOF, log)."""
        return self.root / "redis"

    @property
    def redis_conf(self) -> Path:
        """Our redis.conf."""
        return self.redis / "redis.conf"

    @property
    def redis_data(self) -> Path:
        """Redis's working dir; redis-server chdirs here."""
        return self.redis / "data"

    @property
    def redis_log(self) -> Path:
        """Redis's stdout and stderr."""
        return self.redis / "redis.log"


def render_pom() -> str:
    """A packaging-pom project whose runtime dependency tree is a runnable broker."""
    deps = [
        ("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),
        ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
        ("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
        ("org.apache.logging.log4j", "log4j-api", LOG4J_VERSION),
    ]
    lines = "\n".join(
        f"    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in deps
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>agentledger.local</groupId><artifactId>kafka-broker</artifactId>"
        f"<version>{KAFKA_VERSION}</version><packaging>pom</packaging>\n"
        f"  <dependencies>\n{lines}\n  </dependencies>\n"
        "</project>\n"
    )


def maven_command(paths: StackPaths, repo_local: Path | None = None) -> list[str]:
    """The mvn invocation that copies the broker's runtime jars into the jar directory."""
    argv = [
        "mvn",
        "-B",
        "-q",
        "-f",
        str(paths.pom),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={paths.jars}",
    ]
    if repo_local is not None:
        argv.append(f"-Dmaven.repo.local={repo_local}")
    return argv


def render_properties(values: Mapping[str, str | int]) -> str:
    """Java properties text, one key=value per line, in the given order."""
    return "".join(f"{key}={value}\n" for key, value in values.items())


def parse_properties(text: str) -> dict[str, str]:
    """The key=value pairs of simple Java properties text (comments and blanks skipped)."""
    result: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, _, value = line.partition("=")
        result[key.strip()] = value.strip()
    return result


def server_properties(ports: KafkaPorts, data_dir: Path) -> dict[str, str | int]:
    """A single-node KRaft broker+controller sized for a small machine."""
    broker = f"127.0.0.1:{ports.broker}"
    controller = f"127.0.0.1:{ports.controller}"
    return {
        **kraft_node_properties(
            node_id=1,
            quorum=("controller.quorum.bootstrap.servers", controller),
            listeners=f"PLAINTEXT://{broker},CONTROLLER://{controller}",
            names=("CONTROLLER", "PLAINTEXT"),
            protocol_map="PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            data_dir=data_dir,
            replicas=(1, 1),
        ),
        "log.cleaner.dedupe.buffer.size": 16777216,
    }


def kraft_node_properties(
    *,
    node_id: int,
    quorum: tuple[str, str],
    listeners: str,
    names: tuple[str, str],
    protocol_map: str,
    data_dir: Path,
    replicas: tuple[int, int],
) -> dict[str, str | int]:
    """What every broker+controller of ours has (single node and cluster): its listeners
    (``names``: the controller's and the inter-broker one), ``quorum`` (key and value),
    internal topics with ``replicas`` (replication factor, min ISR), small thread pools."""
    factor, min_isr = replicas
    return {
        "process.roles": "broker,controller",
        "node.id": node_id,
        quorum[0]: quorum[1],
        "listeners": listeners,
        "advertised.listeners": listeners,
        "controller.listener.names": names[0],
        "inter.broker.listener.name": names[1],
        "listener.security.protocol.map": protocol_map,
        "log.dirs": str(data_dir),
        # Topics are created explicitly by `agentledger topics ensure`; an auto-created topic
        # would silently get one partition and break co-partitioning.
        "auto.create.topics.enable": "false",
        "num.partitions": 1,
        "default.replication.factor": factor,
        "min.insync.replicas": min_isr,
        "offsets.topic.replication.factor": factor,
        "offsets.topic.num.partitions": 1,
        "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": 1,
        "share.coordinator.state.topic.replication.factor": factor,
        "share.coordinator.state.topic.min.isr": min_isr,
        "share.coordinator.state.topic.num.partitions": 1,
        "group.initial.rebalance.delay.ms": 0,
        # A SIGKILLed writer's open transaction blocks read_committed readers of its partitions
        # until the broker aborts it; check for timed-out transactions every second, not 10 s.
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000,
        "num.network.threads": 2,
        "num.io.threads": 2,
        "num.recovery.threads.per.data.dir": 1,
    }


def render_log4j2(level: str) -> str:
    """Root logger at ``level`` to one console appender (the broker's stdout is our log file)."""
    return (
        "status = warn\n"
        "appender.console.type = Console\n"
        "appender.console.name = STDOUT\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = [%d] %p %m (%c)%n\n"
        f"rootLogger.level = {level}\n"
        "rootLogger.appenderRef.stdout.ref = STDOUT\n"
    )


def kafka_classpath(paths: StackPaths) -> str:
    """Every jar of the jar directory, as a java wildcard classpath."""
    return f"{paths.jars}/*"


def jvm_options(paths: StackPaths, log4j: Path) -> list[str]:
    """Small-heap JVM flags with our log4j2 config."""
    return [
        *JVM_HEAP,
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        f"-Dkafka.logs.dir={paths.kafka}",
        "-cp",
        kafka_classpath(paths),
    ]


def kafka_command(paths: StackPaths) -> list[str]:
    """The broker's argv; the absolute server.properties path identifies it later."""
    return ["java", *jvm_options(paths, paths.log4j), KAFKA_MAIN, str(paths.server_properties)]


def format_command(paths: StackPaths, cluster_id: str) -> list[str]:
    """The storage tool's argv formatting a standalone KRaft log directory."""
    return [
        "java",
        *jvm_options(paths, paths.tool_log4j),
        STORAGE_TOOL_MAIN,
        "format",
        "--standalone",
        "--ignore-formatted",
        "-t",
        cluster_id,
        "-c",
        str(paths.server_properties),
    ]


def new_cluster_id() -> str:
    """A Kafka cluster id: url-safe base64 of 16 random bytes, never starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def redis_conf_lines(data_dir: Path) -> list[str]:
    """What every redis-server of ours is: on loopback, in the foreground (we manage the
    process), AOF fsynced every second, logging to its stdout (our log file)."""
    return [
        "bind 127.0.0.1",
        "protected-mode yes",
        "daemonize no",
        f'dir "{data_dir}"',
        "appendonly yes",
        "appendfsync everysec",
        'save ""',
        "loglevel notice",
        'logfile ""',
    ]


def render_redis_conf(port: int, data_dir: Path) -> str:
    """The single node's redis.conf: :func:`redis_conf_lines` on ``port``, 16 databases."""
    return "\n".join([f"port {port}", *redis_conf_lines(data_dir), "databases 16"]) + "\n"


def redis_command(redis_server: str, conf: Path) -> list[str]:
    """The redis-server argv for our config."""
    return [redis_server, str(conf)]
