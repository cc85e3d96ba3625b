"""Topic administration: create every topic idempotently and report drift from its spec."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import structlog
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, for_code

from agentledger.bus.clients import starting_quietly
from agentledger.bus.diagnosis import raise_if_security
from agentledger.errors import ConfigurationError, UnreachableError
from agentledger.events.topics import RUN_ROLES, TopicSpec
from agentledger.kafkaclient import kafka_options
from agentledger.settings import CommonSettings

log = structlog.get_logger(__name__)

TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_OR_PARTITION = 3
ADMIN_TIMEOUT_MS = 30_000
METADATA_SETTLE_S = 30.0


class TopicState(StrEnum):
    """What ensuring did to one topic."""

    CREATED = "created"
    UNCHANGED = "unchanged"
    DRIFTED = "drifted"


@dataclass(frozen=True)
class Drift:
    """One property of an existing topic that differs from its spec."""

    property: str
    expected: str
    actual: str


@dataclass(frozen=True)
class ObservedTopic:
    """An existing topic as the broker describes it."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]


@dataclass(frozen=True)
class TopicOutcome:
    """The result for one topic."""

    name: str
    role: str
    state: TopicState
    drift: tuple[Drift, ...] = ()


@dataclass(frozen=True)
class EnsureReport:
    """The result of ``ensure_topics`` for every spec, in spec order."""

    topics: tuple[TopicOutcome, ...] = field(default_factory=tuple)

    @property
    def has_drift(self) -> bool:
        """Whether any existing topic differs from its spec."""
        return any(t.state is TopicState.DRIFTED for t in self.topics)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "drift": self.has_drift,
            "topics": [
                {
                    "name": t.name,
                    "role": t.role,
                    "state": t.state.value,
                    "drift": [vars(d) for d in t.drift],
                }
                for t in self.topics
            ],
        }

    def lines(self) -> list[str]:
        """Human-readable report, one line per topic plus one per drifted property."""
        out: list[str] = []
        for t in self.topics:
            out.append(f"{t.state.value:<9} {t.name} ({t.role})")
            out.extend(
                f"          {d.property}: expected {d.expected}, found {d.actual}" for d in t.drift
            )
        return out


MAX_DEFAULT_REPLICATION = 3


def min_insync_replicas(replication_factor: int) -> int:
    """min.insync.replicas for a replication factor: 2 from 3 replicas on (a write survives the
    loss of one broker and is on two before it is acknowledged), else 1."""
    return 2 if replication_factor >= MAX_DEFAULT_REPLICATION else 1


def default_replication(brokers: int) -> int:
    """The replication factor when none is set: min(3, brokers), so 1 on the single-node stack.

    Counted from the live brokers: set AGENTLEDGER_REPLICATION_FACTOR on a cluster where
    topics may be created while a broker is down.
    """
    return max(1, min(MAX_DEFAULT_REPLICATION, brokers))


def expected_configs(spec: TopicSpec, replication_factor: int) -> dict[str, str]:
    """The topic-level configs a spec sets explicitly."""
    return {
        "retention.ms": str(spec.retention_ms),
        "cleanup.policy": spec.cleanup_policy,
        "min.insync.replicas": str(min_insync_replicas(replication_factor)),
    }


def compare(spec: TopicSpec, replication_factor: int, observed: ObservedTopic) -> tuple[Drift, ...]:
    """Every difference between a spec and the topic the broker has."""
    drift: list[Drift] = []
    if observed.partitions != spec.partitions:
        drift.append(Drift("partitions", str(spec.partitions), str(observed.partitions)))
    if observed.replication_factor != replication_factor:
        drift.append(
            Drift("replication_factor", str(replication_factor), str(observed.replication_factor))
        )
    for key, want in expected_configs(spec, replication_factor).items():
        have = observed.configs.get(key)
        if have != want:
            drift.append(Drift(key, want, "<unset>" if have is None else have))
    return tuple(drift)


def check_specs(specs: Sequence[TopicSpec]) -> None:
    """Reject specs that would break co-partitioning or repeat a name."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        msg = f"topic specs repeat a name: {sorted(names)}"
        raise ConfigurationError(msg)
    run_counts = {s.partitions for s in specs if s.role in RUN_ROLES}
    if len(run_counts) > 1:
        msg = (
            f"run topics must be co-partitioned (one partition count), got {sorted(run_counts)}: "
            "set AGENTLEDGER_RUN_PARTITIONS"
        )
        raise ConfigurationError(msg)


def _bootstrap(settings: CommonSettings) -> str:
    """The bootstrap servers; commands resolve the local stack before calling the admin."""
    if settings.kafka_bootstrap is None:
        msg = (
            "kafka_bootstrap is not set: resolve it with agentledger.stack.resolve_settings "
            "or set AGENTLEDGER_KAFKA_BOOTSTRAP"
        )
        raise ConfigurationError(msg)
    return settings.kafka_bootstrap


@asynccontextmanager
async def kafka_admin(
    bootstrap: str, *, settings: CommonSettings | None = None
) -> AsyncIterator[AIOKafkaAdminClient]:
    """A started admin client, closed on exit; connection failures become UnreachableError.

    ``settings`` give the security options (:func:`~agentledger.kafkaclient.kafka_options`).
    """
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=ADMIN_TIMEOUT_MS,
        **kafka_options(settings),
    )
    try:
        try:
            with starting_quietly():
                await admin.start()
        except (KafkaError, OSError) as e:
            await raise_if_security(settings, bootstrap)
            raise UnreachableError("Kafka", bootstrap, "is the broker running?") from e
        yield admin
    finally:
        await admin.close()


def _check_errors(pairs: Sequence[tuple[str, int, str | None]], tolerated: set[int]) -> None:
    """Raise on the first per-topic error code not tolerated."""
    for topic, code, message in pairs:
        if code != 0 and code not in tolerated:
            name = for_code(code).__name__
            msg = f"topic {topic}: broker refused with {name}: {message or 'no message'}"
            raise ConfigurationError(msg)


async def _create(admin: AIOKafkaAdminClient, specs: Sequence[TopicSpec], rf: int) -> set[str]:
    """Create the topics; returns the names this call created (a racing creator is fine)."""
    if not specs:
        return set()
    new = [NewTopic(s.name, s.partitions, rf, topic_configs=expected_configs(s, rf)) for s in specs]
    response = (await admin.create_topics(new, timeout_ms=ADMIN_TIMEOUT_MS)).to_object()
    errors = response["topic_errors"]
    pairs = [(e["topic"], e["error_code"], e.get("error_message")) for e in errors]
    _check_errors(pairs, {TOPIC_ALREADY_EXISTS})
    return {topic for topic, code, _ in pairs if code == 0}


def _settled(topic: Mapping[str, Any]) -> bool:
    """Whether the broker's metadata shows the topic with a leader for every partition."""
    parts = topic["partitions"]
    return topic["error_code"] == 0 and bool(parts) and all(p["leader"] >= 0 for p in parts)


async def _describe_settled(
    admin: AIOKafkaAdminClient, names: Sequence[str]
) -> list[dict[str, Any]]:
    """Describe topics, waiting while a just-created topic has not reached the metadata cache."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + METADATA_SETTLE_S
    while True:
        described: list[dict[str, Any]] = await admin.describe_topics(list(names))
        if all(_settled(t) for t in described) or loop.time() >= deadline:
            break
        await asyncio.sleep(0.05)
    tolerated: set[int] = set()
    _check_errors([(t["topic"], t["error_code"], None) for t in described], tolerated)
    return described


async def _observe(admin: AIOKafkaAdminClient, names: Sequence[str]) -> dict[str, ObservedTopic]:
    """Partition count, replication factor and configs of existing topics."""
    if not names:
        return {}
    described = await _describe_settled(admin, names)
    responses = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
    )
    configs: dict[str, dict[str, str]] = {}
    for response in responses:
        for res in response.to_object()["resources"]:
            _check_errors([(res["resource_name"], res["error_code"], res["error_message"])], set())
            configs[res["resource_name"]] = {
                e["config_names"]: e["config_value"] for e in res["config_entries"]
            }
    observed: dict[str, ObservedTopic] = {}
    for topic in described:
        parts = topic["partitions"]
        observed[topic["topic"]] = ObservedTopic(
            name=topic["topic"],
            partitions=len(parts),
            replication_factor=min((len(p["replicas"]) for p in parts), default=0),
            configs=configs.get(topic["topic"], {}),
        )
    return observed


async def ensure_topics(settings: CommonSettings, specs: Sequence[TopicSpec]) -> EnsureReport:
    """Create missing topics with their partitions, replication and configs; report drift.

    Existing topics are never changed: a different partition count would move runs to other
    partitions, so drift is reported for a person to decide.
    """
    check_specs(specs)
    async with kafka_admin(_bootstrap(settings), settings=settings) as admin:
        rf = settings.replication_factor or default_replication(
            len((await admin.describe_cluster())["brokers"])
        )
        existing = set(await admin.list_topics())
        created = await _create(admin, [s for s in specs if s.name not in existing], rf)
        if created:
            # Creation is asynchronous: return only once the topics can be produced to.
            await _describe_settled(admin, sorted(created))
        observed = await _observe(admin, [s.name for s in specs if s.name not in created])
    outcomes: list[TopicOutcome] = []
    for spec in specs:
        if spec.name in created:
            outcomes.append(TopicOutcome(spec.name, spec.role, TopicState.CREATED))
            continue
        drift = compare(spec, rf, observed[spec.name])
        state = TopicState.DRIFTED if drift else TopicState.UNCHANGED
        outcomes.append(TopicOutcome(spec.name, spec.role, state, drift))
    report = EnsureReport(tuple(outcomes))
    log.info(
        "topics_ensured",
        created=sum(t.state is TopicState.CREATED for t in report.topics),
        drifted=sum(t.state is TopicState.DRIFTED for t in report.topics),
    )
    return report


async def delete_topics(settings: CommonSettings, names: Sequence[str]) -> None:
    """Delete topics (missing ones are ignored); used to clean up after tests."""
    async with kafka_admin(_bootstrap(settings), settings=settings) as admin:
        existing = set(await admin.list_topics())
        doomed = [n for n in names if n in existing]
        if not doomed:
            return
        response = (await admin.delete_topics(doomed, timeout_ms=ADMIN_TIMEOUT_MS)).to_object()
    pairs = [(e["topic"], e["error_code"], None) for e in response["topic_error_codes"]]
    _check_errors(pairs, {UNKNOWN_TOPIC_OR_PARTITION})


async def require_topics(settings: CommonSettings, names: Sequence[str]) -> None:
    """Fail fast, in one line, when Kafka lacks any of ``names`` or does not answer in time.

    Without this a writer waits for metadata of a topic that never comes (a 40 s
    UnreachableError after hundreds of warnings) and a consumer reports ready with 0 partitions.
    """
    bootstrap = _bootstrap(settings)
    timeout_s = settings.kafka_connect_timeout_ms / 1000
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=settings.kafka_connect_timeout_ms,
        **kafka_options(settings),
    )
    try:
        async with asyncio.timeout(timeout_s):
            with starting_quietly():
                await admin.start()
            existing = set(await admin.list_topics())
    except (TimeoutError, KafkaError, OSError) as e:
        await raise_if_security(settings, bootstrap)
        hint = (
            f"no answer within {settings.kafka_connect_timeout_ms} ms ({type(e).__name__}); is "
            "the broker up and AGENTLEDGER_KAFKA_BOOTSTRAP right?"
        )
        raise UnreachableError("Kafka", bootstrap, hint) from e
    finally:
        await admin.close()
    missing = sorted(set(names) - existing)
    if missing:
        raise missing_topics_error(settings, bootstrap, missing)


def missing_topics_error(
    settings: CommonSettings | None, bootstrap: str, missing: Sequence[str]
) -> ConfigurationError:
    """The one line that says which topics Kafka lacks and how to make them."""
    prefix = settings.topic_prefix if settings is not None else "?"
    msg = (
        f"topics {', '.join(missing)} do not exist on {bootstrap} "
        f"(AGENTLEDGER_TOPIC_PREFIX={prefix!r}): run `agentledger topics ensure`"
    )
    return ConfigurationError(msg)
