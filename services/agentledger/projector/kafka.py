"""The projector's direct reader of Kafka: committed records of offset ranges (read_committed).

Used for catch-up (a hole between stored progress and where delivery resumed, a quiet
partition's tail) and for rebuilds. Group-less: it never commits offsets or joins a group.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from agentledger.bus.clients import start_client, stop_client
from agentledger.errors import ConfigurationError, UnreachableError
from agentledger.kafkaclient import kafka_options
from agentledger.projector.ports import LogReader, LogRecord
from agentledger.settings import CommonSettings
from agentledger.tasks import within
from agentledger.views.store import TopicPartition as Tp

_POLL_MS = 50


class KafkaLogReader(LogReader):
    """A read_committed consumer assigned on demand; an async context manager."""

    def __init__(
        self,
        bootstrap: str,
        *,
        connect_timeout_ms: int = 10_000,
        stall_timeout_ms: int = 60_000,
        client_id: str = "agentledger-projector-reader",
        settings: CommonSettings | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._security = settings
        self._connect_timeout_ms = connect_timeout_ms
        self._stall_timeout_s = stall_timeout_ms / 1000
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            client_id=client_id,
            max_partition_fetch_bytes=4 * 1024 * 1024,
            **kafka_options(settings),
        )
        self._admin: AIOKafkaAdminClient | None = None
        self._use = asyncio.Lock()  # one assignment of the consumer at a time
        self._started = False
        self._stopped = False

    async def __aenter__(self) -> Self:
        await start_client(
            self._consumer,
            bootstrap=self._bootstrap,
            timeout_ms=self._connect_timeout_ms,
            role="projector reader",
            settings=self._security,
        )
        self._started = True
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Close the consumer and the admin client (idempotent)."""
        if self._started and not self._stopped:
            await stop_client(self._consumer)
        if self._admin is not None:
            await self._admin.close()
            self._admin = None
        self._stopped = True

    async def _admin_client(self) -> AIOKafkaAdminClient:
        if self._admin is None:
            admin = AIOKafkaAdminClient(
                bootstrap_servers=self._bootstrap, **kafka_options(self._security)
            )
            try:
                await within(admin.start(), self._connect_timeout_ms / 1000)
            except (TimeoutError, KafkaError, OSError) as e:
                await admin.close()
                raise UnreachableError("Kafka", self._bootstrap, "admin client") from e
            self._admin = admin
        return self._admin

    async def read(
        self, ranges: Mapping[Tp, tuple[int, int]], chunk: int
    ) -> AsyncIterator[Sequence[LogRecord]]:
        """See :meth:`LogReader.read`; raises UnreachableError if no progress for a while."""
        remaining = {
            TopicPartition(t, p): end for (t, p), (start, end) in ranges.items() if end > start
        }
        if not remaining:
            return
        async with self._use:
            async for records in self._read(ranges, remaining, chunk):
                yield records

    async def _read(
        self,
        ranges: Mapping[Tp, tuple[int, int]],
        remaining: dict[TopicPartition, int],
        chunk: int,
    ) -> AsyncIterator[Sequence[LogRecord]]:
        self._consumer.assign(list(remaining))
        for (topic, partition), (start, _) in ranges.items():
            tp = TopicPartition(topic, partition)
            if tp in remaining:
                self._consumer.seek(tp, start)
        last_progress = time.monotonic()
        while remaining:
            batch = await self._consumer.getmany(*remaining, timeout_ms=_POLL_MS, max_records=chunk)
            found: list[LogRecord] = []
            for tp, messages in batch.items():
                end = remaining.get(tp)
                if end is None or not messages:
                    continue
                # aiokafka's records as they are (see LogRecord); a fetch reaching past the
                # range's end (only the last one of a partition) is cut there
                if messages[-1].offset < end:
                    found.extend(messages)
                else:
                    found.extend(m for m in messages if m.offset < end)
            for tp in list(remaining):
                if await self._consumer.position(tp) >= remaining[tp]:
                    del remaining[tp]
                    self._consumer.pause(tp)
            if found:
                last_progress = time.monotonic()
                yield found
            elif remaining and time.monotonic() - last_progress > self._stall_timeout_s:
                where = {f"{tp.topic}:{tp.partition}": end for tp, end in remaining.items()}
                raise UnreachableError("Kafka", self._bootstrap, f"no records up to {where}")

    async def nonempty(self, ranges: Mapping[Tp, tuple[int, int]]) -> set[Tp]:
        """See :meth:`LogReader.nonempty`: stops at the first record of each partition."""
        remaining = {
            TopicPartition(t, p): end for (t, p), (start, end) in ranges.items() if end > start
        }
        found: set[Tp] = set()
        if not remaining:
            return found
        async with self._use:
            return await self._probe(ranges, remaining, found)

    async def _probe(
        self,
        ranges: Mapping[Tp, tuple[int, int]],
        remaining: dict[TopicPartition, int],
        found: set[Tp],
    ) -> set[Tp]:
        self._consumer.assign(list(remaining))
        for (topic, partition), (start, end) in ranges.items():
            if end > start:
                self._consumer.seek(TopicPartition(topic, partition), start)
        deadline = time.monotonic() + self._stall_timeout_s
        while remaining and time.monotonic() < deadline:
            batch = await self._consumer.getmany(*remaining, timeout_ms=_POLL_MS, max_records=64)
            for tp, messages in batch.items():
                limit = remaining.get(tp)
                if limit is not None and any(m.offset < limit for m in messages):
                    found.add((tp.topic, tp.partition))
                    del remaining[tp]
                    self._consumer.pause(tp)
            for tp in list(remaining):
                if await self._consumer.position(tp) >= remaining[tp]:
                    del remaining[tp]
                    self._consumer.pause(tp)
        if remaining:
            raise UnreachableError("Kafka", self._bootstrap, f"probing {sorted(remaining)}")
        return found

    async def committed_offsets(self, group: str, tps: Sequence[Tp]) -> dict[Tp, int]:
        """See :meth:`LogReader.committed_offsets`."""
        if not tps:
            return {}
        admin = await self._admin_client()
        parts = [TopicPartition(t, p) for t, p in tps]
        try:
            raw = await admin.list_consumer_group_offsets(group, partitions=parts)
        except KafkaError as e:
            raise UnreachableError("Kafka", self._bootstrap, f"group offsets: {e!r}") from e
        return {(tp.topic, tp.partition): int(m.offset) for tp, m in raw.items() if m.offset >= 0}

    async def end_offsets(self, tps: Sequence[Tp]) -> dict[Tp, int]:
        """See :meth:`LogReader.end_offsets` (last stable offsets: it reads committed)."""
        return await self._offsets(tps, end=True)

    async def beginning_offsets(self, tps: Sequence[Tp]) -> dict[Tp, int]:
        """See :meth:`LogReader.beginning_offsets`."""
        return await self._offsets(tps, end=False)

    async def _offsets(self, tps: Sequence[Tp], *, end: bool) -> dict[Tp, int]:
        if not tps:
            return {}
        parts = [TopicPartition(t, p) for t, p in tps]
        try:
            if end:
                raw = await self._consumer.end_offsets(parts)
            else:
                raw = await self._consumer.beginning_offsets(parts)
        except KafkaError as e:
            raise UnreachableError("Kafka", self._bootstrap, f"listing offsets: {e!r}") from e
        return {(tp.topic, tp.partition): int(offset) for tp, offset in raw.items()}

    async def partitions(self, topics: Sequence[str]) -> list[Tp]:
        """See :meth:`LogReader.partitions`."""
        admin = await self._admin_client()
        described: list[dict[str, Any]] = await admin.describe_topics(list(topics))
        found: list[Tp] = []
        for topic in described:
            if topic["error_code"] != 0:
                msg = f"topic {topic['topic']} cannot be described (error {topic['error_code']})"
                raise ConfigurationError(msg)
            found.extend((topic["topic"], p["partition"]) for p in topic["partitions"])
        return sorted(found)
