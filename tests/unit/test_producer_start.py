"""The transactional producer's start in fewer round trips: the bootstrap asks the run topics'
metadata (creating none) and its answer is the check's, the bootstrap connection is kept for
the broker it reached, the coordinator's connection is opened beside FindCoordinator when
there is one broker, and anything aiokafka lacks falls back to its own start."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.protocol.metadata import MetadataRequest_v5, MetadataResponse_v1

from agentledger.bus import producer_start
from agentledger.bus.producer_start import start_producer
from agentledger.bus.run_topics import RunTopicsRequest, check_run_topics

RUN_TOPICS = ("p.runs.steps", "p.runs.effects", "p.runs.acceptance")


def _metadata(brokers: Sequence[tuple[int, str, int]]) -> Any:
    """A Metadata v1 answer naming ``brokers`` and the run topics (4 partitions each)."""
    topics = [(0, t, False, [(0, p, 1, [1], [1]) for p in range(4)]) for t in RUN_TOPICS]
    return MetadataResponse_v1([(n, h, p, None) for n, h, p in brokers], 1, topics)


class _Conn:
    """A connection that answers every request with ``answer`` and records what it was sent."""

    def __init__(self, host: str, port: int, answer: Any) -> None:
        self.host, self.port, self.answer = host, port, answer
        self.sent: list[Any] = []
        self.closed = False

    def connected(self) -> bool:
        return not self.closed

    async def send(self, request: Any) -> Any:
        self.sent.append(request)
        return self.answer

    def close(self, reason: Any = None, exc: Any = None) -> asyncio.Future[None]:
        self.closed = True
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class _Connector:
    """Stands for aiokafka's ``create_conn`` (in this module and aiokafka's client)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.opened: list[_Conn] = []

    async def __call__(self, host: str, port: int, **_: Any) -> _Conn:
        await asyncio.sleep(0)
        conn = _Conn(host, port, self.answer)
        self.opened.append(conn)
        return conn


class _Sender:
    """The producer's sender: its start asks FindCoordinator (here: looks at the client's
    connections while it would wait for the answer) and InitProducerId."""

    def __init__(self, client: AIOKafkaClient) -> None:
        self.client = client
        self.seen: list[set[Any]] = []

    async def start(self) -> None:
        for _ in range(5):  # the FindCoordinator round trip
            await asyncio.sleep(0)
        self.seen.append(set(self.client._conns))


class _Producer:
    def __init__(self, bootstrap: str) -> None:
        self.client = AIOKafkaClient(bootstrap_servers=bootstrap)
        self._sender = _Sender(self.client)


def _connector(
    monkeypatch: pytest.MonkeyPatch, brokers: Sequence[tuple[int, str, int]]
) -> _Connector:
    connector = _Connector(_metadata(brokers))
    monkeypatch.setattr(producer_start, "create_conn", connector)
    monkeypatch.setattr("aiokafka.client.create_conn", connector)
    return connector


async def _stop(producer: _Producer) -> None:
    await producer.client.close()


async def test_the_bootstrap_asks_the_run_topics_and_the_check_reads_its_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bootstrap's one metadata request names the run topics without creating them; its
    answer is handed back, and the check reads it without asking anything."""
    connector = _connector(monkeypatch, [(1, "127.0.0.1", 9092)])
    producer = _Producer("127.0.0.1:9092")
    answer = await start_producer(producer, RUN_TOPICS)
    (request,) = connector.opened[0].sent
    assert isinstance(request, RunTopicsRequest)
    assert request.build(MetadataRequest_v5) == MetadataRequest_v5(list(RUN_TOPICS), False)
    assert answer is connector.answer

    class _Silent:
        cluster = producer.client.cluster
        _topics: ClassVar[set[str]] = set()

        async def send(self, *_: Any) -> Any:
            raise AssertionError("the check asked again")

    assert await check_run_topics(_Silent(), RUN_TOPICS, answer) == ({t: 4 for t in RUN_TOPICS}, [])
    await _stop(producer)


async def test_the_bootstrap_connection_is_kept_for_the_broker_it_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broker advertising the bootstrap's host and port gets the bootstrap connection:
    FindCoordinator's request goes over it, no second connection is opened to it."""
    connector = _connector(monkeypatch, [(1, "127.0.0.1", 9092)])
    producer = _Producer("127.0.0.1:9092")
    await start_producer(producer, RUN_TOPICS)
    (bootstrap, coordination) = connector.opened
    assert producer.client._conns[(1, ConnectionGroup.DEFAULT)] is bootstrap
    assert not bootstrap.closed
    assert producer.client._conns[(1, ConnectionGroup.COORDINATION)] is coordination
    assert await producer.client.ready(1)
    assert len(connector.opened) == 2
    await _stop(producer)


async def test_a_bootstrap_connection_to_another_name_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A broker advertised under another host name than the bootstrap's is connected anew (its
    TLS peer name is another), and the bootstrap connection is closed, as aiokafka does."""
    connector = _connector(monkeypatch, [(1, "127.0.0.1", 9092)])
    producer = _Producer("localhost:9092")
    await start_producer(producer, RUN_TOPICS)
    assert connector.opened[0].closed
    assert (1, ConnectionGroup.DEFAULT) not in producer.client._conns
    await _stop(producer)


async def test_one_broker_gets_its_coordination_connection_beside_find_coordinator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With one broker, its coordination connection is open while FindCoordinator is under way;
    with two, none is opened before the coordinator is known."""
    _connector(monkeypatch, [(1, "127.0.0.1", 9092)])
    producer = _Producer("127.0.0.1:9092")
    await start_producer(producer, RUN_TOPICS)
    assert (1, ConnectionGroup.COORDINATION) in producer._sender.seen[0]
    await _stop(producer)

    _connector(monkeypatch, [(1, "127.0.0.1", 9092), (2, "127.0.0.1", 9093)])
    two = _Producer("127.0.0.1:9092")
    await start_producer(two, RUN_TOPICS)
    assert not any(group == ConnectionGroup.COORDINATION for _, group in two._sender.seen[0])
    await _stop(two)


async def test_a_producer_without_the_parts_it_reads_starts_as_aiokafka_does() -> None:
    """A producer lacking what the start reads of aiokafka is started by its own start()."""

    class _Plain:
        client = object()
        started = False

        async def start(self) -> None:
            self.started = True

    plain = _Plain()
    assert await start_producer(plain, RUN_TOPICS) is None
    assert plain.started


async def test_the_installed_aiokafka_has_every_part_the_start_reads() -> None:
    """aiokafka's transactional producer has what the start reads (else it would fall back)."""
    producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:1", transactional_id="t")
    assert producer_start._understood(producer)
    await producer.stop()
