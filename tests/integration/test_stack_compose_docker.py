"""The compose topology, run for real with pytest-docker when a Docker engine is present."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from pytest_docker.plugin import Services
from redis import Redis
from redis.exceptions import RedisError

from agentledger.bus.admin import TopicState, ensure_topics
from agentledger.events.topics import topic_specs
from agentledger.settings import CommonSettings
from agentledger.stack.kafka import broker_answers

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

COMPOSE_FILE = Path(__file__).resolve().parents[2] / "compose" / "docker-compose.yml"
KAFKA = "localhost:19092"
REDIS_PORT = 16379
SANDBOX = "http://localhost:18765/healthz"


def _no_docker_reason() -> str | None:
    """Why the compose stack cannot run here, or None when it can."""
    if shutil.which("docker") is None:
        return "no docker CLI on PATH"
    info = subprocess.run(
        ["docker", "info"], capture_output=True, text=True, check=False, timeout=60
    )
    if info.returncode != 0:
        lines = info.stderr.strip().splitlines()
        return f"no Docker engine: `docker info` failed: {lines[-1] if lines else info.returncode}"
    compose = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, check=False, timeout=60
    )
    if compose.returncode != 0:
        return "the Docker Compose v2 plugin (`docker compose`) is not installed"
    return None


@pytest.fixture(scope="session")
def docker_compose_file() -> str:
    """pytest-docker runs our compose file."""
    return str(COMPOSE_FILE)


@pytest.fixture(scope="session")
def compose_stack(request: pytest.FixtureRequest) -> Services:
    """The running compose project (built and healthy), or a skip saying why it cannot run."""
    reason = _no_docker_reason()
    if reason is not None:
        pytest.skip(reason)
    services: Services = request.getfixturevalue("docker_services")
    return services


def _kafka_ready() -> bool:
    return asyncio.run(broker_answers(KAFKA))


def _redis_ready() -> bool:
    client = Redis(host="localhost", port=REDIS_PORT, socket_timeout=2)
    try:
        return bool(client.ping())
    except RedisError:
        return False
    finally:
        client.close()


def _sandbox_ready() -> bool:
    try:
        with urllib.request.urlopen(SANDBOX, timeout=3) as response:
            return response.status == 200
    except OSError:
        return False


def test_compose_stack_runs_every_service(
    compose_stack: Services, docker_compose_project_name: str
) -> None:
    """Kafka, Redis and the sandbox answer from the host, topics exist, and the services run."""
    for check in (_kafka_ready, _redis_ready, _sandbox_ready):
        compose_stack.wait_until_responsive(check=check, timeout=300.0, pause=2.0)
    settings = CommonSettings(kafka_bootstrap=KAFKA, redis_url=f"redis://localhost:{REDIS_PORT}/0")
    report = asyncio.run(ensure_topics(settings, topic_specs(settings)))
    assert {t.state for t in report.topics} == {TopicState.UNCHANGED}  # the topics job made them
    ps = subprocess.run(
        [
            "docker",
            "compose",
            "-f",
            str(COMPOSE_FILE),
            "-p",
            docker_compose_project_name,
            "ps",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    rows = [json.loads(line) for line in ps.stdout.splitlines() if line.strip()]
    running = {row["Service"] for row in rows if row["State"] == "running"}
    assert {"kafka", "redis", "sandbox", "worker", "projector", "reconciler"} <= running
