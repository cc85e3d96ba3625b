"""Every ``AGENTLEDGER_*`` variable some agentledger settings class reads, as plain data.

A program imports only the settings of what it runs (an SDK program never imports the
reconciler's), yet its environment may hold every service's variables: the typo check
(:func:`agentledger.settings.unknown_variables`) knows them all from this list without importing
every service. ``tests/unit/test_settings_everywhere.py`` fails when it and the classes differ,
``tests/unit/test_readme_settings.py`` when README's configuration table and this list differ.

``python -m agentledger.settings_doc --markdown [--missing-from README.md]`` prints table rows.
"""

from __future__ import annotations

import re

VARIABLES: frozenset[str] = frozenset(
    {
        "AGENTLEDGER_ALERTS_LOG",
        "AGENTLEDGER_ALERTS_RETENTION_MS",
        "AGENTLEDGER_APPROVAL_LEASE_WAIT_S",
        "AGENTLEDGER_APPROVAL_TTL_S",
        "AGENTLEDGER_BLOB_DIR",
        "AGENTLEDGER_BLOB_THRESHOLD_BYTES",
        "AGENTLEDGER_CHECKPOINTS",
        "AGENTLEDGER_CHECKPOINT_WAIT_MS",
        "AGENTLEDGER_CONSOLE_HOST",
        "AGENTLEDGER_CONSOLE_LIST_LIMIT",
        "AGENTLEDGER_CONSOLE_LIVE_INTERVAL_S",
        "AGENTLEDGER_CONSOLE_PORT",
        "AGENTLEDGER_CONSOLE_TOKEN",
        "AGENTLEDGER_DEADLETTER_RETENTION_MS",
        "AGENTLEDGER_EFFECTS_RETENTION_MS",
        "AGENTLEDGER_FLEET_COMMIT_INTERVAL_MS",
        "AGENTLEDGER_FLEET_CONCURRENCY",
        "AGENTLEDGER_FLEET_DRAIN_S",
        "AGENTLEDGER_FLEET_GROUP",
        "AGENTLEDGER_FLEET_HEARTBEAT_MS",
        "AGENTLEDGER_FLEET_METRICS_HOST",
        "AGENTLEDGER_FLEET_METRICS_PORT",
        "AGENTLEDGER_FLEET_RETRY_BACKOFF_MS",
        "AGENTLEDGER_FLEET_RUN_RETRIES",
        "AGENTLEDGER_FLEET_SESSION_TIMEOUT_MS",
        "AGENTLEDGER_FLEET_STABLE_TIMEOUT_S",
        "AGENTLEDGER_HASH_KEY",
        "AGENTLEDGER_IDLE_RELEASE_MS",
        "AGENTLEDGER_KAFKA_BOOTSTRAP",
        "AGENTLEDGER_KAFKA_COMPRESSION",
        "AGENTLEDGER_KAFKA_CONNECT_TIMEOUT_MS",
        "AGENTLEDGER_KAFKA_PUBLISH_TIMEOUT_MS",
        "AGENTLEDGER_KAFKA_SASL_MECHANISM",
        "AGENTLEDGER_KAFKA_SASL_PASSWORD",
        "AGENTLEDGER_KAFKA_SASL_USERNAME",
        "AGENTLEDGER_KAFKA_SECURITY_PROTOCOL",
        "AGENTLEDGER_KAFKA_SSL_CAFILE",
        "AGENTLEDGER_KAFKA_SSL_CERTFILE",
        "AGENTLEDGER_KAFKA_SSL_KEYFILE",
        "AGENTLEDGER_KAFKA_TRANSACTION_TIMEOUT_MS",
        "AGENTLEDGER_KAFKA_TXN_RETRY_BACKOFF_MS",
        "AGENTLEDGER_KEY_PREFIX",
        "AGENTLEDGER_KILL_HIT",
        "AGENTLEDGER_KILL_POINT",
        "AGENTLEDGER_LEASE_TTL_MS",
        "AGENTLEDGER_LEASE_WAIT_S",
        "AGENTLEDGER_LOG_LEVEL",
        "AGENTLEDGER_OUTAGE_BUDGET_S",
        "AGENTLEDGER_PAGERDUTY_ROUTING_KEY",
        "AGENTLEDGER_PAGERDUTY_URL",
        "AGENTLEDGER_PROJECTOR_BATCH_MAX",
        "AGENTLEDGER_PROJECTOR_CACHE_RUNS",
        "AGENTLEDGER_PROJECTOR_CHUNK",
        "AGENTLEDGER_PROJECTOR_GAP_ALERT_MS",
        "AGENTLEDGER_PROJECTOR_PARKED_MAX",
        "AGENTLEDGER_PROJECTOR_GROUP",
        "AGENTLEDGER_PROJECTOR_HOLD_MS",
        "AGENTLEDGER_PROJECTOR_KILL_HIT",
        "AGENTLEDGER_PROJECTOR_KILL_POINT",
        "AGENTLEDGER_PROJECTOR_LINGER_MS",
        "AGENTLEDGER_PROJECTOR_SESSION_TIMEOUT_MS",
        "AGENTLEDGER_PROJECTOR_TICK_MS",
        "AGENTLEDGER_PROJECTOR_WEB_ENABLED",
        "AGENTLEDGER_PROJECTOR_WEB_HOST",
        "AGENTLEDGER_PROJECTOR_WEB_PORT",
        "AGENTLEDGER_PROJECTOR_WEDGED_AFTER_MS",
        "AGENTLEDGER_PROVIDER_CONNECT_TIMEOUT_S",
        "AGENTLEDGER_PROVIDER_TIMEOUT_S",
        "AGENTLEDGER_PROVIDER_URL",
        "AGENTLEDGER_REBUILD_SWAP_GRACE_MS",
        "AGENTLEDGER_REBUILD_CHUNK",
        "AGENTLEDGER_REBUILD_WORKERS",
        "AGENTLEDGER_RECONCILER_ALERT_FLUSH_MS",
        "AGENTLEDGER_RECONCILER_AUTO_COMPENSATE",
        "AGENTLEDGER_RECONCILER_BARRIER_TIMEOUT_S",
        "AGENTLEDGER_RECONCILER_BATCH_SIZE",
        "AGENTLEDGER_RECONCILER_DEFAULT_PROVIDER",
        "AGENTLEDGER_RECONCILER_ID",
        "AGENTLEDGER_RECONCILER_INTENT_GRACE_MS",
        "AGENTLEDGER_RECONCILER_LEASE_TTL_MS",
        "AGENTLEDGER_RECONCILER_METRICS_HOST",
        "AGENTLEDGER_RECONCILER_METRICS_PORT",
        "AGENTLEDGER_RECONCILER_ORPHAN_GRACE_MS",
        "AGENTLEDGER_RECONCILER_POLL_INTERVAL_S",
        "AGENTLEDGER_RECONCILER_PROVIDERS",
        "AGENTLEDGER_RECONCILER_RUN_CONCURRENCY",
        "AGENTLEDGER_RECONCILER_SCAN_LIMIT",
        "AGENTLEDGER_RECONCILER_WATCH_INTERVAL_S",
        "AGENTLEDGER_REDIS_CLUSTER",
        "AGENTLEDGER_REDIS_MAX_CONNECTIONS",
        "AGENTLEDGER_REDIS_POOL_WAIT_S",
        "AGENTLEDGER_REDIS_SSL_CAFILE",
        "AGENTLEDGER_REDIS_URL",
        "AGENTLEDGER_REPLICATION_FACTOR",
        "AGENTLEDGER_REQUESTS_RETENTION_MS",
        "AGENTLEDGER_RESUME_BARRIER_S",
        "AGENTLEDGER_RUN_INDEX",
        "AGENTLEDGER_RUN_PARTITIONS",
        "AGENTLEDGER_RUN_RETENTION_MS",
        "AGENTLEDGER_SANDBOX_DB",
        "AGENTLEDGER_SANDBOX_FAULTS",
        "AGENTLEDGER_SANDBOX_HOST",
        "AGENTLEDGER_SANDBOX_PORT",
        "AGENTLEDGER_SANDBOX_SYNCHRONOUS",
        "AGENTLEDGER_SERVICE_PARTITIONS",
        "AGENTLEDGER_SLACK_WEBHOOK_URL",
        "AGENTLEDGER_STATE_DIR",
        "AGENTLEDGER_THREAD_RUN_PREFIX",
        "AGENTLEDGER_TOPIC_PREFIX",
        "AGENTLEDGER_TRACES_FILE",
        "AGENTLEDGER_TRANSACTIONAL_ID",
        "AGENTLEDGER_USE_VIEWS",
        "AGENTLEDGER_VIEW_RETENTION_MS",
        "AGENTLEDGER_WEBHOOK_ATTEMPTS",
        "AGENTLEDGER_WEBHOOK_BACKOFF_BASE_MS",
        "AGENTLEDGER_WEBHOOK_BACKOFF_MAX_MS",
        "AGENTLEDGER_WEBHOOK_TIMEOUT_S",
        "AGENTLEDGER_WEBHOOK_URL",
        "AGENTLEDGER_WORKER_ID",
    }
)


_ROW = re.compile(r"^\| *((?:`[A-Z0-9_.]+`(?:, *)?)+) *\|([^|]*)\|")


def documented_variables(readme: str) -> list[str]:
    """The variables the first column of README's Configuration table names, in order
    (``..._X`` stands for ``AGENTLEDGER_X``)."""
    section = readme.partition("\n## Configuration\n")[2].partition("\n## ")[0]
    names: list[str] = []
    for line in section.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        for name in re.findall(r"`([A-Z0-9_.]+)`", match.group(1)):
            names.append(
                "AGENTLEDGER_" + name.removeprefix("..._") if name.startswith("...") else name
            )
    return names


def documented_defaults(readme: str) -> dict[str, str]:
    """The default README's Configuration table gives each variable: the k-th backticked value
    of a row's default cell belongs to the row's k-th variable (variables without one, e.g.
    "unset", are left out)."""
    section = readme.partition("\n## Configuration\n")[2].partition("\n## ")[0]
    defaults: dict[str, str] = {}
    for line in section.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        names = [
            "AGENTLEDGER_" + name.removeprefix("..._") if name.startswith("...") else name
            for name in re.findall(r"`([A-Z0-9_.]+)`", match.group(1))
        ]
        values = re.findall(r"`([^`]*)`", match.group(2))
        defaults.update(zip(names, values, strict=False))
    return defaults
