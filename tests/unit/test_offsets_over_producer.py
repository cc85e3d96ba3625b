"""Offsets and the run topics' check asked over a client already connected (the producer's):
read_committed, one request per leader, retried after a leader moved, no topic created, and the
reader's own consumer only while no such client is there."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import (
    KafkaTimeoutError,
    TopicAuthorizationFailedError,
)
from aiokafka.protocol.metadata import (
    MetadataRequest_v0,
    MetadataRequest_v1,
    MetadataRequest_v3,
    MetadataRequest_v5,
    MetadataResponse_v1,
)
from aiokafka.protocol.offset import OffsetRequest_v2, OffsetResponse_v2

from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.offsets import EARLIEST, LATEST, list_offsets
from agentledger.bus.reading import RunReader
from agentledger.bus.run_topics import RunTopicsRequest, check_run_topics, partition_counts
from agentledger.errors import UnreachableError
from agentledger.events.codec import EventCodec
from agentledger.settings import CommonSettings

RUN_TOPICS = ("p.runs.steps", "p.runs.effects", "p.runs.acceptance")
UNKNOWN_TOPIC = 3
NOT_LEADER = 6


@dataclass
class _Broker:
    nodeId: int  # noqa: N815 - aiokafka's name


@dataclass
class _Cluster:
    leaders: dict[TopicPartition, int]
    installed: list[Any] = field(default_factory=list)

    def leader_for_partition(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp)

    def brokers(self) -> list[_Broker]:
        return [_Broker(n) for n in sorted(set(self.leaders.values()))]

    def update_metadata(self, answer: Any) -> None:
        self.installed.append(answer)


class _Client:
    """An aiokafka client's surface that the offsets and the check use; answers ListOffsets
    from ``ends`` (offset per partition), with ``errors`` given once per partition first."""

    def __init__(
        self,
        leaders: dict[TopicPartition, int],
        ends: dict[TopicPartition, int] | None = None,
        errors: dict[TopicPartition, int] | None = None,
        metadata: Any = None,
    ) -> None:
        self.cluster = _Cluster(leaders)
        self.ends = ends or {}
        self.errors = dict(errors or {})
        self.metadata = metadata
        self.sent: list[tuple[int, Any]] = []
        self.refreshes = 0
        self._topics: set[str] = {"other"}

    async def send(self, node: int, request: Any) -> Any:
        built = request.build(OffsetRequest_v2 if request.API_KEY == 2 else MetadataRequest_v5)
        self.sent.append((node, built))
        if request.API_KEY == 3:
            return self.metadata
        topics = []
        for topic, partitions in built.topics:
            rows = []
            for partition, _timestamp in partitions:
                tp = TopicPartition(topic, partition)
                error = self.errors.pop(tp, 0)
                rows.append((partition, error, -1, -1 if error else self.ends[tp]))
            topics.append((topic, rows))
        return OffsetResponse_v2(0, topics)

    async def force_metadata_update(self) -> bool:
        self.refreshes += 1
        return True

    def add_topic(self, topic: str) -> None:
        self._topics.add(topic)


def _metadata(present: Sequence[str], errors: dict[str, int] | None = None) -> Any:
    """A Metadata v1 answer: each topic of ``present`` with 4 partitions led by node 1."""
    errors = errors or {}
    topics = [
        (0, t, False, [(0, p, 1, [1], [1]) for p in range(4)]) for t in present if t not in errors
    ]
    topics += [(code, t, False, []) for t, code in errors.items()]
    return MetadataResponse_v1([(1, "127.0.0.1", 9092, None)], 1, topics)


async def test_end_offsets_are_asked_read_committed_once_per_leader() -> None:
    """Partitions led by two brokers: one ListOffsets request to each, read_committed, at the
    latest offset, and the offsets of every partition come back."""
    a, b, c = (TopicPartition(t, 0) for t in RUN_TOPICS)
    client = _Client({a: 1, b: 2, c: 1}, ends={a: 7, b: 3, c: 0})
    assert await list_offsets(client, [a, b, c], LATEST, 1.0) == {a: 7, b: 3, c: 0}
    assert sorted(node for node, _ in client.sent) == [1, 2]
    for _, request in client.sent:
        assert request.isolation_level == 1
        assert all(ts == LATEST for _, parts in request.topics for _, ts in parts)


async def test_beginning_offsets_ask_the_earliest() -> None:
    """EARLIEST is what the request asks for the beginning offsets."""
    a = TopicPartition(RUN_TOPICS[0], 2)
    client = _Client({a: 1}, ends={a: 0})
    await list_offsets(client, [a], EARLIEST, 1.0)
    assert client.sent[0][1].topics == [(a.topic, [(2, EARLIEST)])]


async def test_a_moved_leader_refreshes_the_metadata_and_asks_again() -> None:
    """NOT_LEADER_FOR_PARTITION once: the client's metadata is refreshed, the offsets asked
    again and told."""
    a = TopicPartition(RUN_TOPICS[0], 0)
    client = _Client({a: 1}, ends={a: 5}, errors={a: NOT_LEADER})
    assert await list_offsets(client, [a], LATEST, 1.0) == {a: 5}
    assert client.refreshes == 1
    assert len(client.sent) == 2


async def test_a_partition_without_a_known_leader_is_waited_for_until_the_deadline() -> None:
    """A partition the client knows no leader of is retried with refreshes, then told as a
    KafkaTimeoutError (the reader's UnreachableError), never as a hang."""
    client = _Client({})
    with pytest.raises(KafkaTimeoutError):
        await list_offsets(client, [TopicPartition(RUN_TOPICS[0], 0)], LATEST, 0.2)
    assert client.refreshes >= 1
    assert RUN_TOPICS[0] in client._topics


async def test_an_error_that_is_not_retriable_is_raised_at_once() -> None:
    """An authorization refusal is raised as it is, without a retry."""
    a = TopicPartition(RUN_TOPICS[0], 0)
    client = _Client({a: 1}, ends={a: 1}, errors={a: TopicAuthorizationFailedError.errno})
    with pytest.raises(TopicAuthorizationFailedError):
        await list_offsets(client, [a], LATEST, 5.0)
    assert len(client.sent) == 1


@pytest.mark.parametrize(
    ("version", "topics", "create"),
    [
        (MetadataRequest_v5, list(RUN_TOPICS), False),
        (MetadataRequest_v3, None, None),
        (MetadataRequest_v1, None, None),
        (MetadataRequest_v0, [], None),
    ],
)
def test_the_check_never_asks_a_broker_to_create_a_topic(
    version: Any, topics: list[str] | None, create: bool | None
) -> None:
    """From Metadata v4 the request names the run topics and forbids creating them; before, it
    names none (every topic is answered, none is created)."""
    built = RunTopicsRequest(RUN_TOPICS).build(version)
    assert built.topics == topics
    if create is not None:
        assert built.allow_auto_topic_creation is create


def test_partition_counts_name_the_missing_topics_in_order() -> None:
    """A topic the broker does not know (or does not list) is missing; the others are counted."""
    answer = _metadata(["p.runs.effects", "other"], errors={"p.runs.steps": UNKNOWN_TOPIC})
    counts, missing = partition_counts(answer, RUN_TOPICS)
    assert counts == {"p.runs.effects": 4}
    assert missing == ["p.runs.steps", "p.runs.acceptance"]


def test_a_topic_error_other_than_unknown_is_raised() -> None:
    """A run topic refused by authorization is raised, not reported as missing."""
    answer = _metadata(RUN_TOPICS[1:], errors={RUN_TOPICS[0]: TopicAuthorizationFailedError.errno})
    with pytest.raises(TopicAuthorizationFailedError):
        partition_counts(answer, RUN_TOPICS)


async def test_the_check_installs_the_answer_and_tracks_the_run_topics() -> None:
    """All run topics there: their counts, the answer installed in the client's metadata and
    the run topics tracked beside the ones it tracked; one missing: nothing installed."""
    client = _Client({TopicPartition("x", 0): 1}, metadata=_metadata(RUN_TOPICS))
    assert await check_run_topics(client, RUN_TOPICS) == ({t: 4 for t in RUN_TOPICS}, [])
    assert client.cluster.installed == [client.metadata]
    assert client._topics == {"other", *RUN_TOPICS}
    lacking = _Client({TopicPartition("x", 0): 1}, metadata=_metadata(RUN_TOPICS[:2]))
    assert await check_run_topics(lacking, RUN_TOPICS) == (
        {t: 4 for t in RUN_TOPICS[:2]},
        [RUN_TOPICS[2]],
    )
    assert lacking.cluster.installed == []
    assert lacking._topics == {"other"}


def _reader(shared: list[Any]) -> RunReader:
    return RunReader(
        "127.0.0.1:1",
        RUN_TOPICS,
        EventCodec(),
        connect_timeout_ms=100,
        read_timeout_ms=200,
        offsets_over=lambda: shared[0],
    )


async def test_the_reader_asks_over_the_shared_client_and_connects_nothing() -> None:
    """With a client given, the end and beginning offsets are asked over it; the reader's own
    offsets consumer is never made."""
    tps = [TopicPartition(t, 1) for t in RUN_TOPICS]
    client = _Client(dict.fromkeys(tps, 1), ends=dict.fromkeys(tps, 4))
    reader = _reader([client])
    positions = await reader.end_positions("run-1", 4)
    assert [p.offset for p in positions] == [4, 4, 4]
    assert await reader._begin_offsets.ask(tps) == dict.fromkeys(tps, 4)
    assert reader._offsets_client is None
    await reader.stop()


async def test_without_a_shared_client_the_reader_asks_over_its_own_consumer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No client given (the producer is being replaced): the reader connects its own consumer
    (here unreachable), as before."""
    reader = _reader([None])
    connects: list[str] = []

    async def connect() -> Any:
        connects.append("consumer")
        raise UnreachableError("Kafka", "127.0.0.1:1", "test")

    monkeypatch.setattr(reader, "_connect", connect)
    with pytest.raises(UnreachableError):
        await reader.end_positions("run-1", 4)
    assert connects == ["consumer"]
    await reader.stop()


async def test_the_log_gives_the_reader_its_producer_client_only_once_started() -> None:
    """The event log offers no client before its producer is there, then the producer's."""
    log = KafkaEventLog(CommonSettings(kafka_bootstrap="127.0.0.1:1"), transactional_id="t")
    assert log._producer_client() is None

    class _Producer:
        client = object()

    log._producer = _Producer()  # type: ignore[assignment]
    assert log._producer_client() is _Producer.client
    log._producer = None
    await asyncio.sleep(0)
