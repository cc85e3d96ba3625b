"""Every Kafka and Redis client in services/ is built with the security options of the settings."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.sources import parse

PACKAGE = Path(__file__).resolve().parents[2] / "services" / "agentledger"

KAFKA_CLIENTS = {"AIOKafkaProducer", "AIOKafkaConsumer", "AIOKafkaAdminClient"}
# Class names whose construction (``X(...)`` or ``X.from_url(...)``) opens Redis connections.
REDIS_CLIENTS = {
    "Redis",
    "RedisCluster",
    "BlockingConnectionPool",
    "ConnectionPool",
    "StaysClosedPool",
    "StaysClosedBlockingPool",
}
FAUST_APPS = {"App", "ProjectorApp"}
# Our own wrappers take the settings whose options they pass on; product code must give them.
WRAPPERS = {
    "pooled_client",
    "redis_client",
    "cluster_client",
    "KafkaLogReader",
    "RunReader",
    "read_record",
    "kafka_admin",
}
# Test helpers shipped in the package default to the plaintext local stack when not told.
HELPER_MODULES = {"testing.py"}


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _calls() -> Iterator[tuple[Path, ast.Call]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                yield path, node


def _splats_options(call: ast.Call, kind: str) -> bool:
    """Whether ``call`` has ``**<something>_options(...)`` (kafka_options, redis_options …)."""
    for keyword in call.keywords:
        if keyword.arg is None and isinstance(keyword.value, ast.Call):
            name = _name(keyword.value.func)
            if name == f"{kind}_options" or name.endswith("_options"):
                return True
    return False


def _where(path: Path, call: ast.Call) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{call.lineno}"


def _redis_constructor(call: ast.Call) -> bool:
    func = call.func
    if _name(func) in REDIS_CLIENTS:
        return True
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "from_url"
        and _name(func.value) in REDIS_CLIENTS
    )


def test_every_kafka_client_gets_the_security_options() -> None:
    """AIOKafkaProducer/Consumer/AdminClient calls all splat **kafka_options(...)."""
    found = [(p, c) for p, c in _calls() if _name(c.func) in KAFKA_CLIENTS]
    assert len(found) >= 12, "the scan no longer finds the Kafka clients"
    missing = [_where(p, c) for p, c in found if not _splats_options(c, "kafka")]
    assert missing == [], f"Kafka clients built without **kafka_options(settings): {missing}"


def test_every_redis_client_gets_the_tls_options() -> None:
    """Redis(...), Redis.from_url(...) and connection pools all splat **redis_options(...)."""
    found = [(p, c) for p, c in _calls() if _redis_constructor(c)]
    # the clients are built in redisclient (redis_client, cluster_client, pooled_client) and
    # the stacks; product code calls those wrappers with settings= (checked below)
    assert len(found) >= 6, "the scan no longer finds the Redis clients"
    missing = [_where(p, c) for p, c in found if not _splats_options(c, "redis")]
    assert missing == [], f"Redis clients built without **redis_options(settings, url): {missing}"


def test_the_faust_app_gets_the_broker_credentials() -> None:
    """The projector's faust app is built with broker_credentials from the settings."""
    found = [(p, c) for p, c in _calls() if _name(c.func) in FAUST_APPS]
    assert found, "the scan no longer finds the faust app"
    missing = [
        _where(p, c) for p, c in found if "broker_credentials" not in {k.arg for k in c.keywords}
    ]
    assert missing == [], f"faust apps without broker_credentials: {missing}"


def test_product_code_gives_the_wrappers_its_settings() -> None:
    """Outside the shipped test helpers, every client wrapper is called with settings=."""
    found = [
        (p, c)
        for p, c in _calls()
        if p.name not in HELPER_MODULES
        and (
            _name(c.func) in WRAPPERS
            or (isinstance(c.func, ast.Attribute) and _name(c.func.value) == "RedisViewStore")
        )
    ]
    assert len(found) >= 10, "the scan no longer finds the wrappers' callers"
    missing = [_where(p, c) for p, c in found if "settings" not in {k.arg for k in c.keywords}]
    assert missing == [], f"client wrappers called without settings=: {missing}"
