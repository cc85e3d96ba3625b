"""In-memory event log with the partitioning and bytes of Kafka: for tests and contract suites."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

from agentledger.bus.fencing import stale_claims, stale_error
from agentledger.bus.partitioning import key_for, partition_for, run_key
from agentledger.bus.port import EventLog, FenceGuard, Position
from agentledger.bus.skips import unskipped
from agentledger.errors import AgentLedgerError, DecodeError, PublishError, RunLogCorruptError
from agentledger.events.codec import EventCodec
from agentledger.events.models import Event, RecordSkipped, RunEvent, now_ms
from agentledger.events.topics import ROLE_SUFFIX, TopicNames
from agentledger.settings import CommonSettings
from agentledger.views.fold import malformed


@dataclass(frozen=True)
class StoredRecord:
    """One committed record as a consumer would see it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


@dataclass
class _Held:
    events: tuple[Event, ...]
    done: asyncio.Future[None]


class MemoryEventLog(EventLog):
    """Topics and partitions in memory; publish is atomic; same keys, partitions and codec as Kafka.

    Tests can hold commits (publishes wait, as if the commit were in flight), then release them
    or ``crash()`` to drop them, as a SIGKILLed writer's open transaction is never visible.
    """

    def __init__(
        self,
        topics: TopicNames | None = None,
        *,
        run_partitions: int = 4,
        service_partitions: int = 1,
        guard: FenceGuard | None = None,
        codec: EventCodec | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.topics = topics or TopicNames("agentledger.")
        self.codec = codec or EventCodec()
        self.guard = guard
        self._clock = clock
        self._logs: dict[str, list[list[StoredRecord]]] = {}
        for role in ROLE_SUFFIX:
            count = service_partitions if role in {"alerts", "deadletter"} else run_partitions
            self._logs[self.topics.for_role(role)] = [[] for _ in range(count)]
        self._holding = False
        self._held: list[_Held] = []
        self._crashed = False

    @classmethod
    def from_settings(
        cls, settings: CommonSettings, *, guard: FenceGuard | None = None
    ) -> MemoryEventLog:
        """A log with the topic names and partition counts of ``settings``."""
        return cls(
            TopicNames(settings.topic_prefix),
            run_partitions=settings.run_partitions,
            service_partitions=settings.service_partitions,
            guard=guard,
        )

    async def __aenter__(self) -> MemoryEventLog:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Fail any held publish (idempotent); committed records stay readable."""
        self._fail_held("the event log was stopped before the commit")

    # --- the port -------------------------------------------------------------------------

    async def publish(self, events: Sequence[Event]) -> None:
        """Write ``events`` atomically (or wait while commits are held)."""
        if self._crashed:
            raise PublishError("the in-memory event log crashed; nothing more is written")
        batch = tuple(events)
        if not batch:
            return
        if self._holding:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._held.append(_Held(batch, done))
            await done
            return
        (error,) = await self._write([batch])
        if error is not None:
            raise error

    async def never_written(self) -> bool:
        """No record on any run-topic partition."""
        return not any(any(parts) for t in self.topics.run_topics for parts in self._logs[t])

    async def read_run(
        self, run_id: str, *, since: Mapping[tuple[str, int], int] | None = None
    ) -> list[RunEvent]:
        """The run's committed events (from ``since``), sorted by seq (stable: duplicates keep
        log order)."""
        key = run_key(run_id)
        found: list[RunEvent] = []
        bad: list[DecodeError] = []
        skips: list[RecordSkipped] = []
        for topic in self.topics.run_topics:
            partitions = self._logs[topic]
            p = partition_for(key, len(partitions))
            first = (since or {}).get((topic, p), 0)
            for record in partitions[p][first:]:
                if record.key != key:
                    continue
                try:
                    event = self.codec.decode(
                        record.value,
                        topic=record.topic,
                        partition=record.partition,
                        offset=record.offset,
                    )
                except DecodeError as e:
                    bad.append(e)
                    continue
                if isinstance(event, RunEvent):
                    if event.run_id != run_id:  # misplaced: the projector dead-letters it
                        continue
                    wrong = malformed(event)  # the projector dead-letters it too
                    if wrong is None:
                        found.append(event)
                    else:
                        bad.append(
                            DecodeError(
                                wrong,
                                topic=record.topic,
                                partition=record.partition,
                                offset=record.offset,
                            )
                        )
                elif isinstance(event, RecordSkipped):
                    skips.append(event)
                else:
                    bad.append(
                        DecodeError(
                            f"{type(event).__name__} is not a run event",
                            topic=record.topic,
                            partition=record.partition,
                            offset=record.offset,
                        )
                    )
        bad = unskipped(run_id, bad, skips)
        if bad:
            raise RunLogCorruptError(run_id, bad)
        found.sort(key=lambda e: e.seq)
        return found

    async def run_end_positions(self, run_id: str) -> list[Position]:
        """The end offset of the run's partition in each run topic."""
        key = run_key(run_id)
        positions = []
        for topic in self.topics.run_topics:
            partitions = self._logs[topic]
            p = partition_for(key, len(partitions))
            positions.append(Position(topic, p, len(partitions[p])))
        return positions

    # --- for tests ------------------------------------------------------------------------

    def partitions(self, topic: str) -> int:
        """The partition count of ``topic``."""
        return len(self._logs[topic])

    def records(self, topic: str, partition: int | None = None) -> list[StoredRecord]:
        """Every committed record of a topic (one partition, or all in partition order)."""
        partitions = self._logs[topic]
        chosen = partitions if partition is None else [partitions[partition]]
        return [record for part in chosen for record in part]

    def events(self, topic: str) -> list[Event]:
        """Every committed record of a topic, decoded (raises DecodeError on poison)."""
        return [
            self.codec.decode(r.value, topic=r.topic, partition=r.partition, offset=r.offset)
            for r in self.records(topic)
        ]

    def append_raw(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> StoredRecord:
        """Append raw bytes (e.g. a poison record), partitioned like Kafka unless given."""
        partitions = self._logs[topic]
        if partition is None:
            partition = 0 if key is None else partition_for(key, len(partitions))
        part = partitions[partition]
        record = StoredRecord(topic, partition, len(part), key, value, self._clock())
        part.append(record)
        return record

    def hold_commits(self) -> None:
        """From now on publishes wait, as if their transaction were open, until released."""
        self._holding = True

    @property
    def held(self) -> int:
        """How many publishes are waiting for a held commit."""
        return len(self._held)

    async def release_commits(self) -> None:
        """Commit every held publish in one group (guard asked once) and stop holding."""
        held, self._held, self._holding = self._held, [], False
        if not held:
            return
        outcomes = await self._write([h.events for h in held])
        for h, error in zip(held, outcomes, strict=True):
            if h.done.done():
                continue
            if error is None:
                h.done.set_result(None)
            else:
                h.done.set_exception(error)

    def crash(self) -> None:
        """Drop every held publish unwritten and refuse further writes (a SIGKILLed writer)."""
        self._crashed = True
        self._fail_held("the writer crashed before the commit")

    # --- internals ------------------------------------------------------------------------

    def _fail_held(self, reason: str) -> None:
        held, self._held = self._held, []
        for h in held:
            if not h.done.done():
                h.done.set_exception(PublishError(reason))

    async def _write(self, batches: list[tuple[Event, ...]]) -> list[AgentLedgerError | None]:
        """Write ``batches`` together (guard asked once); one outcome per batch."""
        try:
            stale = await stale_claims(self.guard, batches) if self.guard else set()
        except Exception as e:  # noqa: BLE001 - the guard's failure is every caller's failure
            failed = PublishError(f"fence check failed, nothing was written: {e}")
            return [failed for _ in batches]
        outcomes: list[AgentLedgerError | None] = []
        for batch in batches:
            error = stale_error(batch, stale)
            if error is None:
                encoded = [
                    (self.topics.for_event(e), key_for(e), self.codec.encode(e)) for e in batch
                ]
                for topic, key, value in encoded:
                    self.append_raw(topic, key, value)
            outcomes.append(error)
        return outcomes
