"""The cluster stack's broker configs: a static quorum of three, replication 3, min ISR 2."""

from __future__ import annotations

from pathlib import Path

from agentledger.stack.certs import ensure_certificates
from agentledger.stack.cluster_config import (
    NODE_IDS,
    BrokerPorts,
    ClusterPaths,
    Credentials,
    broker_properties,
    cluster_format_command,
    security_properties,
)

PORTS = {n: BrokerPorts(9000 + 10 * n, 9001 + 10 * n, 9002 + 10 * n) for n in NODE_IDS}
CREDS = Credentials(client_password="c-secret", broker_password="b-secret")


def test_every_node_votes_and_replicates_three_times() -> None:
    """Each node lists all three controllers as voters; internal topics get RF 3, min ISR 2."""
    props = broker_properties(2, PORTS, Path("/d"), None)
    assert props["node.id"] == 2
    assert props["controller.quorum.voters"] == (
        "1@127.0.0.1:9012,2@127.0.0.1:9022,3@127.0.0.1:9032"
    )
    assert props["default.replication.factor"] == 3
    assert props["min.insync.replicas"] == 2
    assert props["transaction.state.log.min.isr"] == 2
    assert props["offsets.topic.replication.factor"] == 3
    assert "127.0.0.1:9020" in str(props["listeners"])


def test_a_secured_node_has_no_plaintext_listener(tmp_path: Path) -> None:
    """With security every listener is SASL_SSL or SSL (controllers need a CA-signed cert)."""
    certs = ensure_certificates(tmp_path / "certs")
    props = broker_properties(1, PORTS, Path("/d"), security_properties(certs, CREDS))
    protocols = {
        pair.split(":")[1] for pair in str(props["listener.security.protocol.map"]).split(",")
    }
    assert protocols == {"SASL_SSL", "SSL"}
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["ssl.truststore.location"] == str(certs.ca_cert)
    assert "b-secret" in str(props["listener.name.internal.scram-sha-512.sasl.jaas.config"])


def test_formatting_a_secured_node_creates_the_scram_users() -> None:
    """The storage format adds the client user for both SCRAM mechanisms and the broker user."""
    argv = cluster_format_command(ClusterPaths(Path("/s")), 1, "cid", CREDS)
    users = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--add-scram"]
    assert users == [
        "SCRAM-SHA-256=[name=agentledger,password=c-secret]",
        "SCRAM-SHA-512=[name=agentledger,password=c-secret]",
        "SCRAM-SHA-512=[name=broker,password=b-secret]",
    ]
    assert "--add-scram" not in cluster_format_command(ClusterPaths(Path("/s")), 1, "cid", None)
