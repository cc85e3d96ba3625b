"""compose/docker-compose.yml: every service named, ports and health checks consistent."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentledger.cli import build_parser
from agentledger.stack.config import KAFKA_VERSION

COMPOSE_DIR = Path(__file__).resolve().parents[2] / "compose"
INFRA = {"kafka", "redis"}
APPS = {"worker", "projector", "reconciler", "sandbox"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """The parsed compose file (anchors and merge keys resolved)."""
    data: dict[str, Any] = yaml.safe_load((COMPOSE_DIR / "docker-compose.yml").read_text())
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The services section."""
    result: dict[str, dict[str, Any]] = compose["services"]
    return result


def _container_ports(service: dict[str, Any]) -> set[int]:
    return {int(str(p).rsplit(":", 1)[1]) for p in service.get("ports", [])}


def _health_text(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    return " ".join(test) if isinstance(test, list) else str(test)


def _built(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in services.items() if "build" in svc}


def test_every_service_is_named(services: dict[str, dict[str, Any]]) -> None:
    """Kafka, Redis, worker, projector, reconciler and the sandbox provider are all there."""
    assert set(services) >= INFRA | APPS


def test_kafka_is_the_same_version_in_kraft_mode(services: dict[str, dict[str, Any]]) -> None:
    """The Kafka image is apache/kafka at the embedded stack's version, broker+controller."""
    kafka = services["kafka"]
    assert kafka["image"] == f"apache/kafka:{KAFKA_VERSION}"
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert str(kafka["environment"]["KAFKA_AUTO_CREATE_TOPICS_ENABLE"]) == "false"


def test_infra_and_sandbox_have_health_checks_on_their_own_ports(
    services: dict[str, dict[str, Any]],
) -> None:
    """Each health check probes a port the service really listens on."""
    kafka = services["kafka"]
    listeners = kafka["environment"]["KAFKA_LISTENERS"]
    listener_ports = {int(p) for p in re.findall(r"://[^:,]*:(\d+)", listeners)}
    probed = re.search(r"--bootstrap-server \S+:(\d+)", _health_text(kafka))
    assert probed is not None
    assert int(probed.group(1)) in listener_ports
    assert _container_ports(kafka) <= listener_ports

    redis = services["redis"]
    redis_port = int(redis["command"][redis["command"].index("--port") + 1])
    assert f"-p {redis_port}" in _health_text(redis)
    assert _container_ports(redis) == {redis_port}

    sandbox = services["sandbox"]
    sandbox_port = int(sandbox["command"][sandbox["command"].index("--port") + 1])
    assert f":{sandbox_port}/healthz" in _health_text(sandbox)
    assert _container_ports(sandbox) == {sandbox_port}
    for svc in (kafka, redis, sandbox):
        assert {"interval", "timeout", "retries"} <= set(svc["healthcheck"])


def test_host_ports_are_distinct_and_advertised(services: dict[str, dict[str, Any]]) -> None:
    """No two services publish the same host port; Kafka advertises its host listener."""
    host_ports = [int(str(p).split(":")[-2]) for s in services.values() for p in s.get("ports", [])]
    assert len(host_ports) == len(set(host_ports))
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    for port in _container_ports(services["kafka"]):
        assert f"localhost:{port}" in advertised


def test_services_wait_for_healthy_kafka_and_redis(services: dict[str, dict[str, Any]]) -> None:
    """Every built service starts only after Kafka and Redis report healthy."""
    built = _built(services)
    assert set(built) >= APPS
    for name, svc in built.items():
        deps = svc["depends_on"]
        for infra in INFRA:
            assert deps[infra]["condition"] == "service_healthy", (name, infra)
        for dep, spec in deps.items():
            if dep in services and "healthcheck" not in services[dep]:
                assert spec["condition"] != "service_healthy", (name, dep)


def test_services_point_at_the_compose_kafka_and_redis(services: dict[str, dict[str, Any]]) -> None:
    """The services' endpoints name a Kafka listener and the Redis port of this file."""
    advertised = services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    redis_cmd = services["redis"]["command"]
    redis_port = redis_cmd[redis_cmd.index("--port") + 1]
    for name, svc in _built(services).items():
        env = svc["environment"]
        assert f"PLAINTEXT://{env['AGENTLEDGER_KAFKA_BOOTSTRAP']}" in advertised, name
        assert env["AGENTLEDGER_REDIS_URL"] == f"redis://redis:{redis_port}/0", name


def test_all_services_come_from_one_dockerfile(services: dict[str, dict[str, Any]]) -> None:
    """Every built service uses the same build context, Dockerfile and image, which exist."""
    builds = {
        (s["build"]["context"], s["build"]["dockerfile"], s["image"])
        for s in _built(services).values()
    }
    assert len(builds) == 1
    context, dockerfile, _image = builds.pop()
    assert (COMPOSE_DIR / context / dockerfile).is_file()


@pytest.mark.parametrize("name", ["topics", "sandbox", "projector", "reconciler", "worker"])
def test_service_command_is_an_agentledger_command(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    """The service runs a subcommand the agentledger CLI actually has, with valid arguments."""
    command = services[name]["command"]
    assert command[0] == "agentledger"
    try:
        args = build_parser().parse_args(command[1:])
    except SystemExit as e:
        pytest.fail(f"{name}: `{' '.join(command)}` does not parse (exit {e.code})")
    assert callable(args.run)


def test_the_worker_runs_an_agent_that_exists(services: dict[str, dict[str, Any]]) -> None:
    """The worker's --agent MODULE:FACTORY names an importable factory."""
    command = services["worker"]["command"]
    module_name, _, factory = command[command.index("--agent") + 1].partition(":")
    assert callable(getattr(importlib.import_module(module_name), factory))


def test_published_ports_listen_on_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    """Kafka, Redis (no password) and the sandbox are published on 127.0.0.1, never 0.0.0.0."""
    published = [str(p) for s in services.values() for p in s.get("ports", [])]
    assert published
    for port in published:
        assert port.startswith("127.0.0.1:"), f"{port} is published on every host interface"
