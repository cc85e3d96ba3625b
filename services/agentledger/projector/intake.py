"""The run topics' records taken in bulk beneath faust, and formed into the projector's batches.

faust delivers one event at a time: each record becomes a Message and an Event, goes through a
topic channel's queue and the agent's stream, and is acked one by one. Measured on this
project's bench that per-event path delivered 2.5-10k records/s, below what the fold and Redis
can do. faust keeps the app, its web server and the consumer group with its co-partitioning
assignor; :class:`BulkConsumer` only changes what happens to a fetched record map: records of
the run topics go to the :class:`Intake` as whole lists (one list per fetch), everything else
goes on through faust as before.

faust never sees these records, so it never acks or commits them: :func:`commit_positions`
commits the projector's own positions (the next offset to apply, read from Redis progress),
so a restart or a rebalance resumes delivery where the views are, not at the log's start.
Those commits are only where delivery resumes; Redis holds the progress (see runner.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import structlog
from faust.transport.drivers.aiokafka import Consumer
from faust.types import TP

from agentledger.projector.ports import LogRecord
from agentledger.tasks import within
from agentledger.views.store import TopicPartition

log = structlog.get_logger(__name__)

#: Fetched record lists that may wait for the fold (each is one fetch: up to a few thousand).
QUEUE_DEPTH = 8


class Intake:
    """A bounded queue of fetched run-topic records; :meth:`batch` takes what has queued up."""

    def __init__(self, topics: Iterable[str], *, batch_max: int, linger_s: float) -> None:
        self.topics = frozenset(topics)
        self._batch_max = batch_max
        self._linger_s = linger_s
        # the last batch reached the cap or left records queued: the fold is behind the log
        self._behind = False
        self._queue: asyncio.Queue[list[LogRecord]] = asyncio.Queue(maxsize=QUEUE_DEPTH)

    async def put(self, records: list[LogRecord]) -> None:
        """Hand over one fetch's records (waits while the fold is behind: back-pressure)."""
        await self._queue.put(records)

    async def put_fetch(self, records: list[LogRecord]) -> None:
        """Hand over everything one fetch drained, in lists of whole partition numbers (every
        run topic's records of a number together, each partition in its order) of about a
        batch each: a run's events on the three topics are folded in one batch when the fetch
        has them all, instead of one topic's a few batches before another's (DESIGN.md §16)."""
        records.sort(key=_partition_of)  # stable: each partition keeps its order
        chunk: list[LogRecord] = []
        for rec in records:
            if len(chunk) >= self._batch_max and rec.partition != chunk[-1].partition:
                await self._queue.put(chunk)
                chunk = []
            chunk.append(rec)
        if chunk:
            await self._queue.put(chunk)

    async def batch(self) -> list[LogRecord]:
        """The next batch: everything queued (up to about the cap), at once while the fold
        keeps up; lingering a little for more only while it is behind.

        The fold batches by itself: what arrives while a batch is applied waits in the queue
        and makes the next batch, so under load batches grow to the cap with no timer. A linger
        after every small batch only delayed each record of a keeping-up projector by it (20 ms
        of the end-to-end lag at 1,000 runs/s, DESIGN.md §16). It is kept for a projector that
        is behind (the previous batch left records queued or reached the cap): there a few ms
        more fill the batch, which spends fewer Redis round trips per record.
        """
        batch = list(await self._queue.get())
        while len(batch) < self._batch_max and not self._queue.empty():
            batch.extend(self._queue.get_nowait())
        if self._behind and len(batch) < self._batch_max:
            await self._linger(batch)
        self._behind = len(batch) >= self._batch_max or not self._queue.empty()
        return batch

    async def _linger(self, batch: list[LogRecord]) -> None:
        """Add what arrives within the linger to ``batch``, until it reaches the cap."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._linger_s
        while len(batch) < self._batch_max:
            if not self._queue.empty():
                batch.extend(self._queue.get_nowait())
                continue
            left = deadline - loop.time()
            if left <= 0:
                return
            try:
                batch.extend(await within(self._queue.get(), left))
            except TimeoutError:
                return


class BulkConsumer(Consumer):
    """faust's aiokafka consumer whose run-topic records go to ``app.intake`` in bulk."""

    async def getmany(self, timeout: float) -> AsyncIterator[tuple[TP, Any]]:  # noqa: ASYNC109 - faust's signature
        """faust's ``getmany`` (same waiting, flow and assignment checks), except that run-topic
        records are handed over as one list instead of being yielded one by one."""
        intake: Intake | None = getattr(self.app, "intake", None)
        if intake is None:
            async for item in super().getmany(timeout):
                yield item
            return
        records, active = await self._wait_next_records(timeout)
        if records is None or self.should_stop:
            return
        if not self.flow_active:
            # as faust does: a rebalance stopped the flow, go back to the committed offsets
            await self.perform_seek()
            return
        taken: list[LogRecord] = []
        for tp, fetched in records.items():
            if active is not None and tp not in active and tp not in self._buffered_partitions:
                continue
            if tp.topic in intake.topics:
                taken.extend(fetched)  # aiokafka's records as they are (see LogRecord)
            else:
                for record in fetched:
                    yield tp, self._to_message(tp, record)
        if taken:
            await intake.put_fetch(taken)


def _partition_of(rec: LogRecord) -> int:
    return rec.partition


async def commit_positions(consumer: Any, positions: Mapping[TopicPartition, int]) -> None:
    """Commit the projector's positions as the group's offsets (assigned partitions only)."""
    offsets = {TP(topic, partition): offset for (topic, partition), offset in positions.items()}
    if not offsets:
        return
    try:
        await consumer._commit_offsets(offsets)  # faust's own commit path
    except Exception as e:  # noqa: BLE001 - a missed commit only means re-reading; log, go on
        log.warning("offset_commit_failed", error=f"{type(e).__name__}: {e}")
