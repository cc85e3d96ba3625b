"""The fleet's work queue: a consumer group on ``runs.requests`` that commits settled offsets only.

Offsets are committed (never automatically) up to the lowest request not yet settled in each
partition (:class:`~agentledger.fleet.offsets.OffsetBook`). A worker that dies leaves its
unsettled requests to whichever member the group gives the partition next; settled ones have
durable runs, which the reconciler's orphan detection re-queues.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType

import structlog
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTP
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata

from agentledger.bus.clients import bootstrap_of, started, stop_client
from agentledger.errors import DecodeError, UnreachableError
from agentledger.events.codec import EventCodec
from agentledger.events.models import ResumeRequested, RunRequested
from agentledger.events.topics import topic_names
from agentledger.fleet.offsets import OffsetBook, TopicPartition
from agentledger.fleet.settings import FleetSettings
from agentledger.kafkaclient import kafka_options

_log = structlog.get_logger(__name__)
RunRequest = RunRequested | ResumeRequested


@dataclass(frozen=True)
class Request:
    """One record of the requests topic: the request, or why it is not one (with its bytes)."""

    tp: TopicPartition
    offset: int
    event: RunRequest | None
    key: bytes | None = None
    value: bytes | None = None
    error: str | None = None


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka is untyped
    def __init__(self, owner: RequestConsumer) -> None:
        self._owner = owner

    async def on_partitions_revoked(self, revoked: Sequence[KafkaTP]) -> None:
        await self._owner.revoked({(tp.topic, tp.partition) for tp in revoked})

    async def on_partitions_assigned(self, assigned: Sequence[KafkaTP]) -> None:
        self._owner.assigned({(tp.topic, tp.partition) for tp in assigned})


class RequestConsumer:
    """Group member on the requests topic; an async context manager."""

    def __init__(
        self, settings: FleetSettings, group_id: str, *, codec: EventCodec | None = None
    ) -> None:
        self._settings = settings
        self._bootstrap = bootstrap_of(settings)
        self.group_id = group_id
        self.topic = topic_names(settings).requests
        self._codec = codec or EventCodec()
        self.book = OffsetBook()
        self._consumer: AIOKafkaConsumer | None = None
        self._stopped = False

    async def __aenter__(self) -> RequestConsumer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Connect and subscribe (UnreachableError within the connect timeout)."""
        s = self._settings

        def make() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self._bootstrap,
                group_id=self.group_id,
                client_id=f"agentledger-fleet-{s.worker_id}",
                isolation_level="read_committed",
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                session_timeout_ms=s.fleet_session_timeout_ms,
                heartbeat_interval_ms=min(s.fleet_heartbeat_ms, s.fleet_session_timeout_ms // 3),
                **kafka_options(s),
            )
            consumer.subscribe([self.topic], listener=_Listener(self))
            return consumer

        self._consumer = await started(
            make, bootstrap=self._bootstrap, timeout_ms=s.kafka_connect_timeout_ms,
            role="requests consumer", budget_s=s.outage_budget_s, settings=s,
        )  # fmt: skip

    async def stop(self) -> None:
        """Commit what is settled, then leave the group (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        if self._consumer is not None:
            await self.commit()
            consumer, self._consumer = self._consumer, None
            await stop_client(consumer)

    # --- rebalance --------------------------------------------------------------------------

    async def revoked(self, tps: set[TopicPartition]) -> None:
        """Commit what is settled in the partitions we lose, then forget them."""
        await self.commit(only=tps)
        for tp in tps:
            self.book.revoke(tp)
        _log.info("requests_revoked", partitions=sorted(tps))  # lists of [topic, partition]

    def assigned(self, tps: set[TopicPartition]) -> None:
        """Track the partitions we got."""
        for tp in tps:
            self.book.assign(tp)
        _log.info("requests_assigned", partitions=sorted(tps))

    # --- consuming --------------------------------------------------------------------------

    async def fetch(self, max_records: int, timeout_ms: int = 200) -> list[Request]:
        """Up to ``max_records`` requests (none while ``max_records`` is 0: partitions paused,
        but the group still sees us poll)."""
        consumer = self._running()
        assignment = consumer.assignment()
        if max_records <= 0:
            consumer.pause(*assignment)
        else:
            paused = consumer.paused()
            if paused:
                consumer.resume(*paused)
        try:
            batches = await consumer.getmany(timeout_ms=timeout_ms, max_records=max(max_records, 1))
        except KafkaError as e:
            raise UnreachableError("Kafka", self._bootstrap, f"fetching requests: {e!r}") from e
        out: list[Request] = []
        for ktp, records in batches.items():
            tp = (ktp.topic, ktp.partition)
            for record in records:
                self.book.take(tp, record.offset)
                out.append(self._decode(tp, record.offset, record.key, record.value))
        return out

    def settle(self, request: Request) -> None:
        """The request can no longer be lost (see :mod:`agentledger.fleet.offsets`)."""
        self.book.settle(request.tp, request.offset)

    async def commit(self, only: set[TopicPartition] | None = None) -> None:
        """Commit the settled positions that moved; a failure is logged (we may have been
        evicted from the group: the next owner re-reads from the last commit)."""
        consumer = self._consumer
        if consumer is None:
            return
        due = self.book.due(only)
        if not due:
            return
        offsets = {KafkaTP(t, p): OffsetAndMetadata(pos, "") for (t, p), pos in due.items()}
        try:
            await consumer.commit(offsets)
        except KafkaError as e:
            where = {f"{t}[{p}]": pos for (t, p), pos in due.items()}
            _log.warning("requests_commit_failed", error=repr(e), positions=where)
            return
        self.book.committed(due)

    def _decode(
        self, tp: TopicPartition, offset: int, key: bytes | None, value: bytes | None
    ) -> Request:
        try:
            event = self._codec.decode(value, topic=tp[0], partition=tp[1], offset=offset)
        except DecodeError as e:
            return Request(tp, offset, None, key, value, e.reason)
        if not isinstance(event, RunRequested | ResumeRequested):
            why = f"{type(event).__name__} is not a run request"
            return Request(tp, offset, None, key, value, why)
        return Request(tp, offset, event)

    def _running(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise UnreachableError("Kafka", self._bootstrap, "the requests consumer is stopped")
        return self._consumer
