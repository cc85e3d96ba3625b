"""The demo on the cluster stack: `agentledger demo --kill-at after-provider-commit` with only
the variables `agentledger stack env --cluster` prints, and topics replicated 3 times."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid

import pytest
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from agentledger.bus.admin import delete_topics
from agentledger.events.topics import topic_names, topic_specs
from tests.chaos.cluster.conftest import CLUSTER_STATE_DIR, ClusterUnderTest, settings_from_env

pytestmark = [pytest.mark.chaos, pytest.mark.cluster, pytest.mark.timeout(600)]


async def test_the_demo_passes_against_the_cluster(cluster: ClusterUnderTest) -> None:
    """The demo kills its worker after the provider committed, flushes this deployment's Redis
    keys, resumes every run: it exits 0 (no duplicate, no lost effect), and every topic it
    created has 3 replicas with min.insync.replicas 2."""
    await cluster.stack.up()
    tag = f"d{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
    env |= cluster.env()
    env |= {
        "AGENTLEDGER_STATE_DIR": str(CLUSTER_STATE_DIR),
        "AGENTLEDGER_TOPIC_PREFIX": f"{tag}.",
        "AGENTLEDGER_KEY_PREFIX": tag,
    }
    settings = settings_from_env(
        cluster.env(), state_dir=CLUSTER_STATE_DIR, topic_prefix=f"{tag}.", key_prefix=tag
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentledger.cli", "--log-level", "WARNING", "demo",
        "--runs", "3", "--kill-at", "after-provider-commit", "--seed", "7",
        "--flush", "namespace", "--json",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=420)
        assert proc.returncode == 0, f"demo failed:\n{out.decode()[-3000:]}\n{err.decode()[-3000:]}"
        report = json.loads(out)
        assert report, out
        admin = cluster.admin()
        await admin.start()
        try:
            names = [spec.name for spec in topic_specs(settings)]
            described = await admin.describe_topics(names)
            configs = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
            )
        finally:
            await admin.close()
        replicas = {t["topic"]: {len(p["replicas"]) for p in t["partitions"]} for t in described}
        assert replicas == {name: {3} for name in names}
        min_isr = {
            res["resource_name"]: entry["config_value"]
            for response in configs
            for res in response.to_object()["resources"]
            for entry in res["config_entries"]
            if entry["config_names"] == "min.insync.replicas"
        }
        assert min_isr == dict.fromkeys(names, "2")
        assert topic_names(settings).steps in names
    finally:
        await delete_topics(settings, [spec.name for spec in topic_specs(settings)])
