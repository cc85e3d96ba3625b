"""The local stack's rendered files: Maven pom, server.properties, log4j2, redis.conf."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from agentledger.stack.config import (
    KAFKA_VERSION,
    LOG4J_VERSION,
    KafkaPorts,
    StackPaths,
    format_command,
    kafka_command,
    maven_command,
    new_cluster_id,
    parse_properties,
    render_log4j2,
    render_pom,
    render_properties,
    render_redis_conf,
    server_properties,
)

NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def test_pom_names_the_broker_and_an_slf4j1_log4j_binding() -> None:
    """The pom resolves kafka_2.13 at our version plus the log4j2 binding for slf4j 1.7."""
    root = ET.fromstring(render_pom())
    deps = {
        (d.findtext("m:artifactId", namespaces=NS), d.findtext("m:version", namespaces=NS))
        for d in root.iterfind("m:dependencies/m:dependency", NS)
    }
    assert ("kafka_2.13", KAFKA_VERSION) in deps
    assert ("log4j-slf4j-impl", LOG4J_VERSION) in deps
    assert root.findtext("m:packaging", namespaces=NS) == "pom"


def test_maven_command_copies_runtime_jars_into_the_jar_dir(tmp_path: Path) -> None:
    """mvn copies the runtime scope into <state>/kafka/lib, with a private repo only on request."""
    paths = StackPaths(tmp_path)
    argv = maven_command(paths)
    assert f"-DoutputDirectory={paths.jars}" in argv
    assert "-DincludeScope=runtime" in argv
    assert not any(a.startswith("-Dmaven.repo.local") for a in argv)
    private = maven_command(paths, tmp_path / "m2")
    assert f"-Dmaven.repo.local={tmp_path / 'm2'}" in private


def test_server_properties_are_a_standalone_kraft_node_on_the_chosen_ports(tmp_path: Path) -> None:
    """Both listeners use the chosen loopback ports and every internal topic has RF 1."""
    props = parse_properties(
        render_properties(server_properties(KafkaPorts(broker=41001, controller=41002), tmp_path))
    )
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:41001,CONTROLLER://127.0.0.1:41002"
    assert props["advertised.listeners"] == props["listeners"]
    assert props["controller.quorum.bootstrap.servers"] == "127.0.0.1:41002"
    assert "controller.quorum.voters" not in props
    assert props["log.dirs"] == str(tmp_path)
    for key in (
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
    ):
        assert props[key] == "1", key
    assert props["auto.create.topics.enable"] == "false"


def test_properties_round_trip_and_skip_comments() -> None:
    """parse_properties reads back what render_properties wrote and ignores comment lines."""
    text = "# comment\n\n" + render_properties({"a.b": 1, "c": "x=y"})
    assert parse_properties(text) == {"a.b": "1", "c": "x=y"}


def test_broker_argv_carries_our_config_path_and_a_small_heap(tmp_path: Path) -> None:
    """The broker runs kafka.Kafka with our server.properties, which later proves ownership."""
    paths = StackPaths(tmp_path)
    argv = kafka_command(paths)
    assert argv[0] == "java"
    assert argv[-2:] == ["kafka.Kafka", str(paths.server_properties)]
    assert "-Xmx512m" in argv
    assert f"-Dlog4j2.configurationFile={paths.log4j}" in argv


def test_format_argv_is_standalone_and_idempotent(tmp_path: Path) -> None:
    """Storage is formatted with --standalone and --ignore-formatted under the given cluster id."""
    argv = format_command(StackPaths(tmp_path), "abc")
    assert argv[argv.index("-t") + 1] == "abc"
    assert {"format", "--standalone", "--ignore-formatted"} <= set(argv)


def test_cluster_ids_are_22_url_safe_chars_not_starting_with_dash() -> None:
    """Generated cluster ids look like Kafka's own Uuid.randomUuid().toString()."""
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    for cid in ids:
        assert len(cid) == 22
        assert not cid.startswith("-")
        assert set(cid) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_log4j2_config_sets_the_root_level() -> None:
    """The log4j2 config logs at the requested level to the console (the broker's log file)."""
    text = render_log4j2("WARN")
    assert "rootLogger.level = WARN" in text
    assert "appender.console.type = Console" in text


def test_redis_conf_is_loopback_aof_foreground(tmp_path: Path) -> None:
    """Redis binds loopback on our port, keeps an AOF fsynced every second, does not daemonize."""
    lines = set(render_redis_conf(41003, tmp_path).splitlines())
    assert {
        "port 41003",
        "bind 127.0.0.1",
        "protected-mode yes",
        "daemonize no",
        "appendonly yes",
        "appendfsync everysec",
        f'dir "{tmp_path}"',
    } <= lines
