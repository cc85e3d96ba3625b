"""The floor: one durable round trip per step, nothing else — Kafka produce (acks=all, no
batching), Redis XADD (appendfsync always), PostgreSQL single-row INSERT (synchronous_commit)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any, ClassVar

import redis.asyncio as aredis
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError
from psycopg_pool import AsyncConnectionPool

from agentledger.bus.clients import tune_concurrent_transactions_backoff
from agentledger.settings import CommonSettings
from bench.peers.base import Peer, PeerUnavailableError, Probe
from bench.peers.kafka_size import topic_bytes
from bench.peers.pg import ensure_database, relation_bytes
from bench.workload import effect_key, external_ref, message

FLOOR_PARTITIONS = 4


def _record(run_id: str, k: int) -> bytes:
    """The step's message and its effect's record, as one JSON value."""
    key = effect_key(run_id, k)
    return json.dumps(
        {
            "run_id": run_id,
            "step": k,
            "message": message(run_id, k),
            "key": key,
            "ref": external_ref(key),
        }
    ).encode()


async def _timed_steps(run_id: str, steps: int, probe: Probe | None, write: Any) -> list[float]:
    """Call ``write(k)`` for each step, timing each round trip."""
    out: list[float] = []
    for k in range(1, steps + 1):
        if probe is not None:
            await probe(k - 1)
        start = time.perf_counter()
        await write(k)
        out.append(time.perf_counter() - start)
    return out


class KafkaFloor(Peer):
    """aiokafka producer, acks=all, linger 0, awaiting each record before the next."""

    name: ClassVar[str] = "floor-kafka"
    kind = "floor"
    resumable = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._producer: Any = None
        self.topic = f"bench.floor.{self.store_name}"

    async def start(self) -> None:
        """Create the topic fresh and start the producer."""
        if self.env.kafka_bootstrap is None:
            raise PeerUnavailableError("no Kafka in this bench session")
        admin = AIOKafkaAdminClient(bootstrap_servers=self.env.kafka_bootstrap)
        await admin.start()
        try:
            if self.fresh and self.topic in await admin.list_topics():
                await admin.delete_topics([self.topic])
            with contextlib.suppress(TopicAlreadyExistsError):
                await admin.create_topics([NewTopic(self.topic, FLOOR_PARTITIONS, 1)])
        finally:
            await admin.close()
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.env.kafka_bootstrap,
            acks="all",
            linger_ms=0,
            enable_idempotence=True,
        )
        await self._producer.start()

    async def stop(self) -> None:
        """Stop the producer."""
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """One send_and_wait per step, keyed by run id."""

        async def write(k: int) -> None:
            await self._producer.send_and_wait(self.topic, _record(run_id, k), key=run_id.encode())

        return await _timed_steps(run_id, steps, probe, write)

    async def stored_bytes(self) -> int:
        """On-disk size of the topic's log segments."""
        return topic_bytes(self.env, [self.topic])

    def notes(self) -> list[str]:
        """Kafka's durability: acked by the (single) in-sync replica, in its page cache."""
        return ["acks=all, idempotent, linger 0; 1 broker: acked in page cache, not fsynced"]


class KafkaTxnFloor(Peer):
    """One aiokafka transaction per step (begin, send, commit) over ``topics`` topics: the
    record on the first, a copy on each other one (what a transaction over a run's steps,
    effects and acceptance topics pays)."""

    name: ClassVar[str] = "floor-kafka-txn"
    kind = "floor"
    resumable = False
    topic_count: ClassVar[int] = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._producer: Any = None
        self.topics = [f"bench.floor.{self.store_name}.{n}" for n in range(self.topic_count)]
        # A producer has one transaction open at a time: concurrent runs take turns.
        self._turn = asyncio.Lock()

    async def start(self) -> None:
        """Create the topics fresh and start a transactional producer."""
        if self.env.kafka_bootstrap is None:
            raise PeerUnavailableError("no Kafka in this bench session")
        admin = AIOKafkaAdminClient(bootstrap_servers=self.env.kafka_bootstrap)
        await admin.start()
        try:
            existing = await admin.list_topics()
            if self.fresh and any(t in existing for t in self.topics):
                await admin.delete_topics([t for t in self.topics if t in existing])
            for topic in self.topics:
                with contextlib.suppress(TopicAlreadyExistsError):
                    await admin.create_topics([NewTopic(topic, FLOOR_PARTITIONS, 1)])
        finally:
            await admin.close()
        # The same CONCURRENT_TRANSACTIONS backoff as agentledger's log (1 ms, not 20 ms).
        tune_concurrent_transactions_backoff(CommonSettings().kafka_txn_retry_backoff_ms)
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.env.kafka_bootstrap,
            acks="all",
            linger_ms=0,
            enable_idempotence=True,
            transactional_id=f"bench-floor-txn-{self.store_name}",
        )
        await self._producer.start()

    async def stop(self) -> None:
        """Stop the producer."""
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """begin_transaction, one send per topic, commit_transaction per step."""
        producer = self._producer
        key = run_id.encode()

        async def write(k: int) -> None:
            record = _record(run_id, k)
            async with self._turn, producer.transaction():
                sent = [await producer.send(t, record, key=key) for t in self.topics]
                for future in sent:
                    await future

        return await _timed_steps(run_id, steps, probe, write)

    async def stored_bytes(self) -> int:
        """On-disk size of the topics' log segments."""
        return topic_bytes(self.env, self.topics)

    def notes(self) -> list[str]:
        """What one step's transaction is made of."""
        return [
            f"one transaction per step over {self.topic_count} topic(s) (AddPartitionsToTxn, "
            "produce, EndTxn), acks=all, linger 0; CONCURRENT_TRANSACTIONS backoff 1 ms as in "
            "agentledger's log; concurrent runs take turns (one open transaction per producer)"
        ]


class KafkaTxn3Floor(KafkaTxnFloor):
    """The transaction floor over three topics, as many as a run's events span."""

    name: ClassVar[str] = "floor-kafka-txn3"
    topic_count: ClassVar[int] = 3


class RedisFloor(Peer):
    """XADD of the step's record to the run's stream on a Redis with appendfsync always."""

    name: ClassVar[str] = "floor-redis"
    kind = "floor"
    resumable = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client: Any = None

    async def start(self) -> None:
        """Connect and clear this namespace's streams."""
        if self.env.fsync_redis_url is None:
            raise PeerUnavailableError("no fsync Redis in this bench session")
        pool = aredis.BlockingConnectionPool.from_url(self.env.fsync_redis_url, max_connections=20)
        self._client = aredis.Redis(connection_pool=pool)
        policy = (await self._client.config_get("appendfsync"))["appendfsync"]
        self._policy = policy
        if self.fresh:
            async for key in self._client.scan_iter(match=f"{self.store_name}:*"):
                await self._client.delete(key)

    async def stop(self) -> None:
        """Close the client."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """One XADD per step."""
        stream = f"{self.store_name}:{run_id}"

        async def write(k: int) -> None:
            await self._client.xadd(stream, {"v": _record(run_id, k)})

        return await _timed_steps(run_id, steps, probe, write)

    async def stored_bytes(self) -> int:
        """MEMORY USAGE summed over this namespace's streams."""
        total = 0
        async for key in self._client.scan_iter(match=f"{self.store_name}:*"):
            total += int(await self._client.memory_usage(key, samples=0) or 0)
        return total

    def notes(self) -> list[str]:
        """Redis's fsync policy, read back from the server."""
        return [f"appendonly yes, appendfsync {self._policy}; bytes = MEMORY USAGE"]


class PostgresFloor(Peer):
    """A single-row INSERT per step, autocommit, synchronous_commit on."""

    name: ClassVar[str] = "floor-postgres"
    kind = "floor"
    resumable = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pool: Any = None
        self._dsn = ""

    async def start(self) -> None:
        """Create the database and table, open a pool of 20."""
        self._dsn = await ensure_database(self.env, self.store_name, fresh=self.fresh)
        self._pool = AsyncConnectionPool(
            self._dsn, min_size=1, max_size=20, open=False, kwargs={"autocommit": True}
        )
        await self._pool.open(wait=True)
        async with self._pool.connection() as c:
            await c.execute(
                "CREATE TABLE IF NOT EXISTS floor_steps (run_id text, step int, record text, "
                "PRIMARY KEY (run_id, step))"
            )

    async def stop(self) -> None:
        """Close the pool."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """One INSERT (its own transaction) per step on one pooled connection."""
        async with self._pool.connection() as c:

            async def write(k: int) -> None:
                await c.execute(
                    "INSERT INTO floor_steps VALUES (%s, %s, %s)",
                    (run_id, k, _record(run_id, k).decode()),
                )

            return await _timed_steps(run_id, steps, probe, write)

    async def stored_bytes(self) -> int:
        """pg_total_relation_size of the table."""
        return await relation_bytes(self._dsn, ["floor_steps"])

    def notes(self) -> list[str]:
        """PostgreSQL durability."""
        return ["fsync=on synchronous_commit=on, autocommit INSERT, pool of 20"]
