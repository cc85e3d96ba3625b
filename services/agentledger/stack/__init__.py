"""The embedded local stack: a real single-node Kafka (KRaft) and a real Redis on loopback."""

from __future__ import annotations

from agentledger.stack.config import KAFKA_VERSION, StackPaths
from agentledger.stack.jars import JarSet, ensure_jars
from agentledger.stack.local import LocalStack
from agentledger.stack.resolve import resolve_endpoints, resolve_settings
from agentledger.stack.state import DownReport, Endpoints, Health, StackStatus, UpReport

__all__ = [
    "KAFKA_VERSION",
    "DownReport",
    "Endpoints",
    "Health",
    "JarSet",
    "LocalStack",
    "StackPaths",
    "StackStatus",
    "UpReport",
    "ensure_jars",
    "resolve_endpoints",
    "resolve_settings",
]
