"""A plain (non-transactional) idempotent publisher for alerts, run requests and dead letters."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import TracebackType

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from agentledger.bus.clients import bootstrap_of, started, stop_client
from agentledger.bus.partitioning import key_for
from agentledger.bus.port import EventPublisher
from agentledger.errors import PublishError
from agentledger.events.codec import EventCodec
from agentledger.events.models import Event
from agentledger.events.topics import TopicNames
from agentledger.kafkaclient import compression_of, kafka_options
from agentledger.settings import CommonSettings
from agentledger.tasks import within


class KafkaPublisher(EventPublisher):
    """acks=all, idempotent producer; an async context manager.

    Events of one ``publish`` are not atomic: if it fails, some may be written. That is fine for
    what goes through here (alerts are keyed by alert id, requests by run id: consumers dedupe);
    run events go through :class:`agentledger.bus.kafka.KafkaEventLog` instead.
    """

    def __init__(
        self,
        settings: CommonSettings,
        *,
        codec: EventCodec | None = None,
        client_id: str = "agentledger-publisher",
    ) -> None:
        self._settings = settings
        self._bootstrap = bootstrap_of(settings)
        self._codec = codec or EventCodec()
        self._client_id = client_id
        self.topics = TopicNames(settings.topic_prefix)
        self._producer: AIOKafkaProducer | None = None
        self._stopped = False

    async def __aenter__(self) -> KafkaPublisher:
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
        """Connect, or raise UnreachableError within the connect timeout."""
        self._producer = await started(
            lambda: AIOKafkaProducer(
                bootstrap_servers=self._bootstrap,
                enable_idempotence=True,
                acks="all",
                linger_ms=0,
                compression_type=compression_of(self._settings),
                client_id=self._client_id,
                **kafka_options(self._settings),
            ),
            bootstrap=self._bootstrap,
            timeout_ms=self._settings.kafka_connect_timeout_ms,
            role="publisher",
            budget_s=self._settings.outage_budget_s,
            settings=self._settings,
        )

    async def stop(self) -> None:
        """Flush and close (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        producer, self._producer = self._producer, None
        if producer is not None:
            await stop_client(producer)

    async def publish(self, events: Sequence[Event]) -> None:
        """Send every event (key and topic as for run events) and wait until all are acked."""
        producer = self._producer
        if producer is None:
            raise PublishError("the publisher is not running (use it inside `async with`)")
        records = [(self.topics.for_event(e), key_for(e), self._codec.encode(e)) for e in events]
        try:
            futures = [
                await producer.send(topic, value=value, key=key) for topic, key, value in records
            ]
            await within(asyncio.gather(*futures), self._settings.kafka_publish_timeout_ms / 1000)
        except (KafkaError, TimeoutError) as e:
            msg = f"publishing {len(records)} event(s) failed, some may be written: {e!r}"
            raise PublishError(msg, maybe_committed=True) from e
