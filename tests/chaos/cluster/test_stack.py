"""The cluster stack itself: what `stack status/env --cluster` report, and no plaintext way in."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from agentledger.stack.procs import is_alive
from tests.chaos.cluster.conftest import CLUSTER_STATE_DIR, ClusterUnderTest

pytestmark = [pytest.mark.chaos, pytest.mark.cluster, pytest.mark.timeout(300)]


async def _cli(*args: str) -> tuple[int, str, str]:
    """``agentledger <args>`` on the cluster tests' state dir, no other AGENTLEDGER_* variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env["AGENTLEDGER_STATE_DIR"] = str(CLUSTER_STATE_DIR)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", *args,
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def _lists_topics(admin: AIOKafkaAdminClient, limit_s: float = 15.0) -> bool:
    """Whether the admin client gets a topic list within ``limit_s``."""
    try:
        async with asyncio.timeout(limit_s):
            await admin.start()
            await admin.list_topics()
    except (KafkaError, OSError, TimeoutError):
        return False
    finally:
        await admin.close()
    return True


async def test_status_lists_every_process_and_env_points_at_it(cluster: ClusterUnderTest) -> None:
    """`stack status --json` names three live brokers and the Redis part with role, port and pid;
    `stack env --cluster` exports the brokers' SASL_SSL bootstrap, credentials and CA."""
    await cluster.stack.up()
    code, out, err = await _cli("stack", "status", "--json")
    assert code == 0, err
    rows = [row for row in json.loads(out)["processes"] if row["stack"] == "cluster"]
    brokers = [row for row in rows if row["role"] == "kafka broker+controller"]
    assert len(brokers) == 3
    assert len(rows) > 3  # the Redis part's processes are listed too
    recorded = {p.name: p for p in cluster.state().processes}
    for row in rows:
        assert row["health"] == "running", row
        proc = recorded[row["name"]]
        assert (row["pid"], row["port"]) == (proc.pid, proc.port)
        assert proc.pid is not None
        assert proc.proc_start is not None
        assert is_alive(proc.pid, proc.proc_start)

    code, out, err = await _cli("stack", "env", "--cluster")
    assert code == 0, err
    env = dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines())
    assert env["AGENTLEDGER_KAFKA_BOOTSTRAP"].split(",") == [
        f"127.0.0.1:{row['port']}" for row in brokers
    ]
    assert env["AGENTLEDGER_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert env["AGENTLEDGER_KAFKA_SASL_MECHANISM"].startswith("SCRAM-SHA-")
    assert env["AGENTLEDGER_KAFKA_SASL_USERNAME"]
    assert env["AGENTLEDGER_KAFKA_SASL_PASSWORD"]
    assert env["AGENTLEDGER_KAFKA_SSL_CAFILE"] == str(cluster.stack.certificates().ca_cert)
    assert "AGENTLEDGER_REDIS_URL" in env
    assert env["AGENTLEDGER_REPLICATION_FACTOR"] == "3"


async def test_a_plaintext_client_cannot_list_topics(cluster: ClusterUnderTest) -> None:
    """No listener of any broker (client, inter-broker, controller) answers a plaintext client,
    while the same request with the stack's credentials and CA lists the topics."""
    await cluster.stack.up()
    assert await _lists_topics(cluster.admin())
    ports = [port for proc in cluster.state().kafka for port in proc.ports.values()]
    assert len(ports) == 9
    plain = [
        AIOKafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=5_000)
        for port in ports
    ]
    answered = await asyncio.gather(*(_lists_topics(admin, limit_s=10.0) for admin in plain))
    assert dict(zip(ports, answered, strict=True)) == dict.fromkeys(ports, False)


async def test_down_stops_exactly_the_recorded_processes(cluster: ClusterUnderTest) -> None:
    """`stack down` stops every process of the cluster stack (the next test's `up` restarts it;
    this one runs last so the package's cluster is not started again for nothing)."""
    await cluster.stack.up()
    before = cluster.state().processes
    code, out, err = await _cli("stack", "down")
    assert code == 0, err
    assert {f"stopped {p.name} (cluster)" for p in before} <= set(out.splitlines())
    for proc in before:
        assert proc.pid is not None
        assert proc.proc_start is not None
        assert not is_alive(proc.pid, proc.proc_start), f"{proc.name} still runs"
    code, out, _ = await _cli("stack", "status", "--json")
    rows = [row for row in json.loads(out)["processes"] if row["stack"] == "cluster"]
    assert {row["health"] for row in rows} == {"stopped"}
    assert code == 1
