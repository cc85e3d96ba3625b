"""The Kafka event log: one transactional producer and a group-commit loop shared by all runs.

``publish`` encodes its events, queues them and waits. The loop takes everything pending, asks
the FenceGuard once for all runs in it (beside the transaction's begin and send, before its
commit), writes it all in ONE transaction and resolves each
caller's future: concurrent runs share a commit, a single run pays about one commit per publish.
A commit that failed is never reported as success; after any failure the producer is replaced
(InitProducerId with the same transactional id aborts whatever the old one left open).
A transaction the broker refused (a missing topic, an authorization) fails its publishes at
once, whatever the outage budget (:func:`agentledger.bus.diagnosis.failure_of`).

While Kafka (or the fence check's Redis) is unreachable, a failed transaction is tried again,
with backoff, until the outage budget (``settings.outage_budget_s``) is spent. A transaction
that failed before its commit request was never committed, so writing it again is safe. One
whose commit request failed has an unknown outcome: once the new producer has resolved it
(InitProducerId completes or aborts it), the log is read back, and the batch is written again
only if its events are not there. Past the budget every waiting publish fails with
UnreachableError naming the dependency and the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType

import structlog
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, ProducerFenced
from aiokafka.structs import RecordMetadata

from agentledger.bus.admin import missing_topics_error
from agentledger.bus.batching import by_partition
from agentledger.bus.clients import (
    bootstrap_of,
    started,
    stop_client,
    tune_concurrent_transactions_backoff,
)
from agentledger.bus.diagnosis import (
    PROBE_TIMEOUT_S,
    Diagnosis,
    Failure,
    any_broker_listening,
    explain_deadline,
    failure_of,
)
from agentledger.bus.fencing import Claim, stale_claims, stale_error
from agentledger.bus.partitioning import key_for, producer_partition
from agentledger.bus.port import EventLog, FenceGuard, Position
from agentledger.bus.producer_start import start_producer
from agentledger.bus.reading import RunReader
from agentledger.bus.run_topics import check_run_topics
from agentledger.errors import (
    AgentLedgerError,
    ConfigurationError,
    EventTooLargeError,
    ProducerFencedError,
    PublishError,
    UnreachableError,
)
from agentledger.events.codec import EventCodec
from agentledger.events.models import Event, RunEvent
from agentledger.events.topics import TopicNames
from agentledger.kafkaclient import compression_of, kafka_options
from agentledger.outage import Outage, backoff, outage_of, ride_out
from agentledger.settings import CommonSettings
from agentledger.tasks import stop_task, within

_log = structlog.get_logger(__name__)
MAX_REQUEST_BYTES = 1_048_576
RECORD_OVERHEAD_BYTES = 512
MAX_EVENTS_PER_COMMIT = 10_000
# A commit in flight this long makes the log look whether any broker still listens (one TCP
# connect each, only while a commit waits).
STALL_CHECK_S = 1.0
# One batch per partition per commit: aiokafka drains one batch per partition per request and
# waits for it before the next, so a group commit overflowing 16 KB batches paid extra trips.
BATCH_BYTES = 512 * 1024

Encoded = tuple[str, bytes | None, bytes]


@dataclass
class _Pending:
    events: tuple[Event, ...]
    records: list[Encoded]
    done: asyncio.Future[None]


@dataclass
class CommitStats:
    """Counters for benchmarks and logs."""

    commits: int = 0
    publishes: int = 0
    events: int = 0
    failed_commits: int = 0
    producer_resets: int = 0
    batch_sizes: list[int] = field(default_factory=list)


class _StaleClaims(Exception):  # noqa: N818 - a signal inside the commit loop, never raised out
    """The fence check found stale claims; the transaction was aborted."""

    def __init__(self, stale: set[Claim]) -> None:
        super().__init__(f"{len(stale)} stale claim(s)")
        self.stale = stale


class _Retry(Exception):  # noqa: N818 - a signal inside the commit loop, never raised out
    """A transaction failed because a dependency is unreachable; the batch may be retried."""

    def __init__(self, dependency: str, error: BaseException, *, maybe_committed: bool) -> None:
        super().__init__(repr(error))
        self.dependency = dependency
        self.error = error
        self.maybe_committed = maybe_committed


class _TimedOut(Exception):  # noqa: N818 - a signal inside the commit loop, never raised out
    """The broker aborted the transaction: it was open longer than transaction.timeout.ms."""


class _CheckFailed(Exception):  # noqa: N818 - a signal inside the commit loop, never raised out
    """The fence check could not be made; the transaction was aborted."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(repr(error))
        self.error = error


class KafkaEventLog(EventLog):
    """EventLog on Kafka; an async context manager owning one transactional producer.

    ``transactional_id`` must be stable per worker: a restarted worker then fences its
    predecessor and aborts its open transaction at once. If the predecessor is never restarted,
    its open transaction blocks read_committed consumers of its partitions until
    ``settings.kafka_transaction_timeout_ms`` (plus the broker's abort-check interval) passes.
    """

    def __init__(
        self,
        settings: CommonSettings,
        *,
        transactional_id: str,
        guard: FenceGuard | None = None,
        codec: EventCodec | None = None,
    ) -> None:
        self._settings = settings
        self._bootstrap = bootstrap_of(settings)
        self._transactional_id = transactional_id
        self._guard = guard
        self._codec = codec or EventCodec()
        self.topics = TopicNames(settings.topic_prefix)
        self._reader = RunReader(
            self._bootstrap,
            self.topics.run_topics,
            self._codec,
            connect_timeout_ms=settings.kafka_connect_timeout_ms,
            read_timeout_ms=settings.kafka_publish_timeout_ms,
            settings=settings,
            outage_budget_s=settings.outage_budget_s,
            offsets_over=self._producer_client,
        )
        self._budget_s = settings.outage_budget_s
        self._producer: AIOKafkaProducer | None = None
        self._pending: list[_Pending] = []
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False
        self._stopped = False
        self._fenced: ProducerFencedError | None = None
        self._starting: asyncio.Future[None] | None = None
        self._partitions: int | None = None
        # The run topics' metadata, as the producer's bootstrap asked it (producer_start.py);
        # the check after the start reads it instead of asking again (once).
        self._bootstrap_answer: object | None = None
        # End offsets (just past the last record) of what this log committed, per partition: the
        # coordinator writes the markers after EndTxn returns, so for a few ms the last stable
        # offset lags behind a commit that publish already reported.
        self._written: dict[tuple[str, int], int] = {}
        self.stats = CommitStats()
        self._log = _log.bind(transactional_id=transactional_id)

    async def __aenter__(self) -> KafkaEventLog:
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
        """Connect (UnreachableError within the connect timeout) and start the commit loop."""
        self.start_soon()
        await self.started()

    def start_soon(self) -> None:
        """Begin connecting and return: every call of the port waits until the start is done
        (and raises its error, if it failed), so a caller can do other work meanwhile (a
        resume reads its view from Redis while the producer's InitProducerId is under way)."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())

    async def started(self) -> None:
        """Wait for the start begun by :meth:`start_soon`; raise its error if it failed."""
        starting = self._starting
        if starting is None:
            raise PublishError("the event log is not running (use it inside `async with`)")
        if not starting.done():
            await asyncio.shield(starting)
        starting.result()

    async def _after_start(self) -> None:
        """Wait for a start begun and not yet done (a log never started is left to fail as
        before: it has no producer)."""
        if self._starting is not None:
            await self.started()

    async def _start(self) -> None:
        tune_concurrent_transactions_backoff(self._settings.kafka_txn_retry_backoff_ms)
        # One client: the producer's. Its InitProducerId fences a predecessor with this
        # transactional id; the run topics are then checked over its connections (one metadata
        # request naming them, creating none: its bootstrap's, §13 session 17), and the end
        # offsets a resume needs are asked over them too (DESIGN.md §13, session 15): no
        # reader's consumer connects at start.
        producer = await self._open_producer()
        try:
            await self._check_run_topics(producer)
        except BaseException:
            # the check's error is the one to tell (a failed __aenter__ gets no __aexit__)
            with contextlib.suppress(Exception):
                await stop_client(producer)
            raise
        self._producer = producer
        self._loop_task = asyncio.get_running_loop().create_task(
            self._commit_loop(), name=f"group-commit:{self._transactional_id}"
        )

    async def _check_run_topics(self, producer: AIOKafkaProducer) -> None:
        """The run topics checked over the producer's client, their partition count learnt;
        ConfigurationError naming the missing ones (what the admin check said)."""

        async def check() -> None:
            answer, self._bootstrap_answer = self._bootstrap_answer, None
            try:
                async with asyncio.timeout(self._settings.kafka_publish_timeout_ms / 1000):
                    counts, missing = await check_run_topics(
                        producer.client, self.topics.run_topics, answer
                    )
            except (TimeoutError, KafkaError) as e:
                raise UnreachableError("Kafka", self._bootstrap, "the run topics' metadata") from e
            if missing:
                raise missing_topics_error(self._settings, self._bootstrap, missing)
            self._partitions = co_partitioned(counts)

        await ride_out(check, dependency="Kafka", endpoint=self._bootstrap, budget_s=self._budget_s)

    def _producer_client(self) -> object | None:
        """The client the reader asks offsets over: the producer's, once it has started (None
        while it is being replaced: the reader then asks over a consumer of its own)."""
        producer = self._producer
        return None if producer is None else producer.client

    async def stop(self) -> None:
        """Commit what is pending (bounded by the publish timeout), then close (idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        self._closing = True
        starting = self._starting
        if starting is not None:  # a start still under way is given up; its error is not told
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting
        self._wakeup.set()
        if self._loop_task is not None:
            try:
                await within(
                    asyncio.shield(self._loop_task), self._settings.kafka_publish_timeout_ms / 1000
                )
            except TimeoutError:
                await stop_task(self._loop_task)
        self._fail(self._pending, PublishError("the event log was stopped before the commit"))
        self._pending.clear()
        if self._producer is not None:
            await stop_client(self._producer)
            self._producer = None
        await self._reader.stop()

    # --- the port -------------------------------------------------------------------------

    async def publish(self, events: Sequence[Event]) -> None:
        """Write ``events`` in one transaction (maybe shared with other publishes); return when
        committed. Raises StaleFenceError, PublishError (retryable) or ProducerFencedError."""
        if self._fenced is not None:
            raise ProducerFencedError(str(self._fenced)) from self._fenced
        if self._loop_task is None and not self._closing:
            await self._after_start()
        if self._closing or self._loop_task is None:
            raise PublishError("the event log is not running (use it inside `async with`)")
        batch = tuple(events)
        if not batch:
            return
        records = [self._encode(e) for e in batch]
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(batch, records, done))
        self._wakeup.set()
        await done

    async def read_run(
        self, run_id: str, *, since: Mapping[tuple[str, int], int] | None = None
    ) -> list[RunEvent]:
        """Every committed event of the run (from ``since``), sorted by seq (see
        :class:`RunReader`)."""
        await self._after_start()
        partitions = await self._partitions_riding_out()
        return await self._reader.read_run(run_id, partitions, self._written, since=since)

    async def run_end_positions(self, run_id: str) -> list[Position]:
        """The last stable offsets of the run's partition in every run topic, never before what
        this log committed (read-your-writes while the commit markers are being written)."""
        # After the start: its InitProducerId fenced a predecessor with this transactional id
        # and aborted what it left open, so no write of its can commit after these offsets.
        await self._after_start()
        positions = await self._reader.end_positions(run_id, await self._partitions_riding_out())
        return self._at_least_written(positions)

    async def runs_end_positions(self, run_ids: Sequence[str]) -> dict[str, list[Position]]:
        """:meth:`run_end_positions` of each run from one ListOffsets round (shared with
        concurrent callers as a single run's is)."""
        await self._after_start()
        found = await self._reader.runs_end_positions(run_ids, await self._partitions_riding_out())
        return {run_id: self._at_least_written(positions) for run_id, positions in found.items()}

    def _at_least_written(self, positions: list[Position]) -> list[Position]:
        """Each position moved up to what this log committed there, if that is later."""
        written = self._written
        return [
            Position(p.topic, p.partition, max(p.offset, written.get((p.topic, p.partition), 0)))
            for p in positions
        ]

    def committed_end(self, topic: str, partition: int) -> int:
        """Just past the last record this log has committed to ``topic``'s ``partition`` (0 if
        it committed nothing there): once a publish returns, its records lie below it."""
        return self._written.get((topic, partition), 0)

    async def never_written(self) -> bool:
        """Every run-topic partition's end offset is 0 (an aborted transaction counts as
        written: its records and marker take offsets)."""
        if self._written:
            return False
        await self._after_start()
        ends = await self._reader.all_end_offsets(await self._partitions_riding_out())
        return all(offset == 0 for offset in ends.values())

    # --- the commit loop ------------------------------------------------------------------

    async def _commit_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                batch = self._take()
                try:
                    await self._commit(batch)
                except Exception as e:  # noqa: BLE001 - the loop must outlive any one commit
                    self._log.exception("group_commit_crashed")
                    self._fail(batch, PublishError(f"commit failed unexpectedly: {e!r}"))
            if self._closing:
                return

    def _take(self) -> list[_Pending]:
        taken: list[_Pending] = []
        count = 0
        while self._pending and (
            not taken or count + len(self._pending[0].records) <= MAX_EVENTS_PER_COMMIT
        ):
            item = self._pending.pop(0)
            count += len(item.records)
            taken.append(item)
        return taken

    async def _commit(self, batch: list[_Pending]) -> None:
        """Write ``batch``, riding out an outage of Kafka or of the fence check's Redis.

        After a commit of unknown outcome nothing is written again before the log has said
        the transaction is not there (``unresolved``).
        """
        attempt = 0
        unresolved = False
        timed_out = False
        waited_for: set[Outage] = set()
        # This batch's own wait: the process-wide outage record restarts whenever any call
        # reaches the broker (a producer start after each failure does), which alone would let
        # a broker that answers but never completes the transaction be retried forever.
        failing_since: float | None = None
        while True:
            live = [p for p in batch if not p.done.done()]  # a cancelled publish is not written
            if not live:
                return
            try:
                if unresolved:
                    if await self._committed(live):
                        self._succeeded(live)
                        return
                    unresolved = False
                await self._watched(live, waited_for)
            except _TimedOut as e:
                # Aborted by the broker, so never committed: written again once, after a new
                # fence check, on the new producer.
                if timed_out:
                    self._fail(live, PublishError(str(e), maybe_committed=False))
                    return
                timed_out = True
            except _Retry as retry:
                unresolved = unresolved or retry.maybe_committed
                outage = outage_of(retry.dependency, self._endpoint_of(retry))
                waited_for.add(outage)
                now = time.monotonic()
                failing_since = now if failing_since is None else failing_since
                waited = max(outage.failed(retry.error, self._budget_s), now - failing_since)
                if waited >= self._budget_s:
                    self._fail(live, outage.past_budget(self._budget_s, retry.error))
                    return
                attempt += 1
                await asyncio.sleep(min(backoff(attempt), self._budget_s - waited))
            else:
                for outage in waited_for:
                    outage.recovered()
                return

    async def _watched(self, live: list[_Pending], waited_for: set[Outage]) -> None:
        """``_commit_once``, saying so when it waits on brokers none of which accepts a
        connection: aiokafka waits a restarting broker out inside its calls, which then neither
        fail nor log, so the wait would show nowhere (no log line, no gauge).

        The commit runs in the loop's own task; one timer, cancelled when it returns, starts the
        probing only if it is still in flight after STALL_CHECK_S (a task and a wait per commit
        cost more than the commit's own bookkeeping)."""
        began = time.monotonic()
        loop = asyncio.get_running_loop()
        probing: list[asyncio.Task[None]] = []

        def stalled() -> None:
            probing.append(
                loop.create_task(
                    self._probe_while_stalled(began, waited_for),
                    name=f"stall-probe:{self._transactional_id}",
                )
            )

        timer = loop.call_later(STALL_CHECK_S, stalled)
        try:
            await self._commit_once(live)
        finally:
            timer.cancel()
            for task in probing:
                await stop_task(task)

    async def _probe_while_stalled(self, began: float, waited_for: set[Outage]) -> None:
        """Every STALL_CHECK_S while a commit is in flight: open the Kafka outage (dated from
        the commit's start) when no bootstrap server accepts a connection."""
        while True:
            if not await any_broker_listening(self._bootstrap):
                outage = outage_of("Kafka", self._bootstrap)
                waited_for.add(outage)
                error = OSError("no broker accepts connections; a commit waits for one")
                outage.failed(error, self._budget_s, since=began)
            await asyncio.sleep(STALL_CHECK_S)

    def _endpoint_of(self, retry: _Retry) -> str:
        endpoint = getattr(retry.error, "endpoint", None)
        return endpoint if retry.dependency == "Redis" and endpoint else self._bootstrap

    async def _committed(self, live: list[_Pending]) -> bool:
        """Whether the transaction of ``live``, whose commit had an unknown outcome, committed;
        raises _Retry while that cannot be told.

        A new producer (InitProducerId with the same transactional id) first completes or
        aborts that transaction; it is all or nothing, so one run event of it, found or not in
        the log, tells for all. A batch without run events cannot be looked up: it is reported
        as not committed (written again: readers skip a duplicate alert id).
        """
        probe = next((e for p in live for e in p.events if isinstance(e, RunEvent)), None)
        try:
            if self._producer is None:
                self._producer = await self._open_producer(budget_s=0.0)
            if probe is None:
                return False
            partitions = await self._run_partitions()
            events = await self._reader.read_run(probe.run_id, partitions, self._written)
        except (UnreachableError, KafkaError, OSError, TimeoutError) as e:
            raise _Retry("Kafka", e, maybe_committed=True) from e
        found = any(e.event_id == probe.event_id for e in events)
        self._log.warning("commit_outcome_resolved", run_id=probe.run_id, committed=found)
        return found

    def _succeeded(self, live: list[_Pending]) -> None:
        self.stats.commits += 1
        self.stats.publishes += len(live)
        self.stats.events += sum(len(p.records) for p in live)
        for p in live:
            if not p.done.done():
                p.done.set_result(None)

    async def _commit_once(self, live: list[_Pending]) -> None:
        """One try at writing ``live``; raises _Retry when a dependency is unreachable."""
        timeout = self._settings.kafka_publish_timeout_ms / 1000
        checking: asyncio.Task[set[Claim]] | None = None
        if self._guard is not None:
            # The fence check runs beside begin + send; the transaction commits only once it has
            # said every claim is live (else it is aborted: read_committed readers never see it).
            checking = asyncio.ensure_future(
                within(stale_claims(self._guard, [p.events for p in live]), timeout)
            )
        try:
            await self._write(live, timeout, checking)
        except _StaleClaims as e:
            writable = []
            for p in live:
                error = stale_error(p.events, e.stale)
                if error is None:
                    writable.append(p)
                elif not p.done.done():  # a cancelled publisher must not fail its batch-mates
                    p.done.set_exception(error)
            if writable:  # the check said these are live: write them alone
                await self._write(writable, timeout, None)
        except _CheckFailed as e:
            unreachable = isinstance(e.error, UnreachableError | TimeoutError | OSError)
            if self._budget_s > 0 and unreachable:
                raise _Retry("Redis", e.error, maybe_committed=False) from e
            self._fail(live, PublishError(f"fence check failed, nothing was written: {e.error!r}"))
        finally:
            if checking is not None:
                await stop_task(checking)

    async def _write(
        self,
        live: list[_Pending],
        limit_s: float,
        checking: asyncio.Task[set[Claim]] | None,
    ) -> None:
        """One transaction of ``live``; raises _StaleClaims/_CheckFailed (after aborting it) when
        the fence check does not let it commit; resolves or fails every publish otherwise."""
        stage = ["open"]
        began = time.monotonic()
        try:
            await within(self._transact(live, stage, checking), limit_s)
        except ProducerFenced as e:
            open_s = time.monotonic() - began
            if open_s >= self._settings.kafka_transaction_timeout_ms / 1000:
                # aiokafka reports the epoch the coordinator bumps when it aborts a transaction
                # open past its timeout (InvalidProducerEpoch) as a fence: no newer producer
                # took the id over. The lease fences, checked again on the rewrite, still stop
                # a zombie.
                self.stats.failed_commits += 1
                self._log.warning("transaction_timed_out", stage=stage[0], open_s=round(open_s, 3))
                await self._reset_producer()
                msg = (
                    f"the transaction was open {open_s:.1f} s, past "
                    f"AGENTLEDGER_KAFKA_TRANSACTION_TIMEOUT_MS="
                    f"{self._settings.kafka_transaction_timeout_ms}, and the broker aborted it"
                )
                raise _TimedOut(msg) from e
            self._fenced = ProducerFencedError(
                f"transactional id {self._transactional_id} was taken over by a newer producer; "
                "this writer must stop"
            )
            self._fenced.__cause__ = e
            self._fail(live, self._fenced)
            return
        except (TimeoutError, KafkaError, UnreachableError, OSError) as e:
            self.stats.failed_commits += 1
            maybe = stage[0] == "commit"
            diagnosis = await self._diagnose(e, live)
            self._log.debug(
                "group_commit_failed",
                stage=stage[0],
                error=repr(e),
                failure=diagnosis.failure.value,
                reason=diagnosis.reason,
            )
            if diagnosis.failure is not Failure.OUTAGE or self._budget_s <= 0:
                # The broker answered (a missing topic, a refusal) or there is no budget: the
                # publishes fail at once, before the producer is replaced (a replacement can
                # take the stop and connect timeouts, and must not count as an outage).
                reason = f" ({diagnosis.reason})" if diagnosis.reason else ""
                self._fail(
                    live,
                    PublishError(
                        f"transaction failed during {stage[0]}: {e!r}{reason}",
                        maybe_committed=maybe,
                    ),
                )
                await self._reset_producer()
                return
            await self._reset_producer()
            raise _Retry("Kafka", e, maybe_committed=maybe) from e
        except (_StaleClaims, _CheckFailed):
            raise
        except Exception as e:  # noqa: BLE001 - an unusable producer is replaced, not kept
            # e.g. aiokafka asserting on begin after its sender died (a fatal transaction state
            # no later call leaves): every later commit would fail the same way.
            self.stats.failed_commits += 1
            self._log.warning("transaction_failed_unexpectedly", stage=stage[0], error=repr(e))
            self._fail(
                live,
                PublishError(
                    f"transaction failed during {stage[0]}: {e!r}",
                    maybe_committed=stage[0] == "commit",
                ),
            )
            await self._reset_producer()
            return
        self._succeeded(live)

    async def _diagnose(self, error: BaseException, live: list[_Pending]) -> Diagnosis:
        """Classify a failed transaction (see :mod:`agentledger.bus.diagnosis`); a deadline of
        ours is explained by asking the broker over the failed producer's own connections."""
        failure = failure_of(error)
        if failure is not Failure.DEADLINE or self._budget_s <= 0:
            return Diagnosis(failure)  # without a budget every failure fails at once anyway
        producer = self._producer
        if producer is None:
            return Diagnosis(Failure.OUTAGE, "no producer is connected")
        topics = {topic for p in live for topic, _, _ in p.records}
        limit_s = min(self._settings.kafka_connect_timeout_ms / 1000, PROBE_TIMEOUT_S)
        return await explain_deadline(producer.client, topics, limit_s)

    async def _transact(
        self,
        batch: list[_Pending],
        stage: list[str],
        checking: asyncio.Task[set[Claim]] | None,
    ) -> None:
        producer = self._producer
        if producer is None:
            stage[0] = "connect"
            producer = self._producer = await self._open_producer(budget_s=0.0)
        stage[0] = "begin"
        await producer.begin_transaction()
        stage[0] = "send"
        sent = await _send_batches(producer, [r for p in batch for r in p.records])
        metadata = await asyncio.gather(*(future for future, _ in sent))
        if checking is not None:
            stage[0] = "fence check"
            try:
                stale = await checking
            except (AgentLedgerError, TimeoutError, OSError) as e:
                stage[0] = "abort"
                await producer.abort_transaction()
                raise _CheckFailed(e) from e
            if stale:
                stage[0] = "abort"
                await producer.abort_transaction()
                raise _StaleClaims(stale)
        stage[0] = "commit"
        await producer.commit_transaction()
        for md, (_, count) in zip(metadata, sent, strict=True):
            tp = (md.topic, md.partition)  # a batch's metadata: its first record's offset
            self._written[tp] = max(self._written.get(tp, 0), md.offset + count)

    async def _reset_producer(self) -> None:
        """Replace the producer after a failed transaction; the replacement's InitProducerId
        (same transactional id) aborts what the old one left open at the coordinator."""
        old, self._producer = self._producer, None
        self.stats.producer_resets += 1
        if old is not None:
            await stop_client(old)
        try:
            self._producer = await self._open_producer(budget_s=0.0)
        except UnreachableError as e:
            # The next commit tries again (the commit loop rides the outage out).
            self._log.debug("producer_reset_failed", error=str(e))

    async def _open_producer(self, *, budget_s: float | None = None) -> AIOKafkaProducer:
        def make() -> AIOKafkaProducer:
            return AIOKafkaProducer(
                bootstrap_servers=self._bootstrap,
                transactional_id=self._transactional_id,
                transaction_timeout_ms=self._settings.kafka_transaction_timeout_ms,
                enable_idempotence=True,
                acks="all",
                linger_ms=0,
                max_request_size=MAX_REQUEST_BYTES,
                max_batch_size=BATCH_BYTES,
                compression_type=compression_of(self._settings),
                partitioner=producer_partition,
                client_id=f"agentledger-{self._transactional_id}",
                **kafka_options(self._settings),
            )

        async def start(producer: AIOKafkaProducer) -> None:
            # the bootstrap asks the run topics' metadata: the start's check reads its answer
            # (a producer replaced later has nothing to check)
            answer = await start_producer(producer, self.topics.run_topics)
            if self._loop_task is None:
                self._bootstrap_answer = answer

        return await started(
            make,
            bootstrap=self._bootstrap,
            timeout_ms=self._settings.kafka_connect_timeout_ms,
            role="transactional producer",
            budget_s=self._budget_s if budget_s is None else budget_s,
            settings=self._settings,
            start=start,
        )

    # --- helpers --------------------------------------------------------------------------

    def _encode(self, event: Event) -> Encoded:
        value = self._codec.encode(event)
        key = key_for(event)
        size = len(value) + len(key or b"") + RECORD_OVERHEAD_BYTES
        if size > MAX_REQUEST_BYTES:
            msg = (
                f"{type(event).__name__} {event.event_id} encodes to {len(value)} bytes, over the "
                f"{MAX_REQUEST_BYTES}-byte limit; store the payload as a reference (uri + hash)"
            )
            raise EventTooLargeError(msg)
        return self.topics.for_event(event), key, value

    async def _partitions_riding_out(self) -> int:
        return await ride_out(
            self._run_partitions, dependency="Kafka", endpoint=self._bootstrap,
            budget_s=self._budget_s,
        )  # fmt: skip

    async def _run_partitions(self) -> int:
        if self._partitions is None:
            producer = self._producer
            if producer is None:
                raise UnreachableError("Kafka", self._bootstrap, "the producer is reconnecting")
            try:
                counts = {t: len(await producer.partitions_for(t)) for t in self.topics.run_topics}
            except KafkaError as e:
                raise UnreachableError(
                    "Kafka", self._bootstrap, f"no metadata for {self.topics.run_topics}: {e!r}"
                ) from e
            self._partitions = co_partitioned(counts)
        return self._partitions

    @staticmethod
    def _fail(batch: Sequence[_Pending], error: BaseException) -> None:
        for p in batch:
            if not p.done.done():
                p.done.set_exception(error)


def co_partitioned(counts: Mapping[str, int]) -> int:
    """The one partition count of the run topics; ConfigurationError when they differ."""
    if len(set(counts.values())) != 1:
        msg = (
            f"run topics are not co-partitioned: {dict(counts)}; "
            "recreate them with one partition count (agentledger topics ensure)"
        )
        raise ConfigurationError(msg)
    return next(iter(counts.values()))


async def _send_batches(
    producer: AIOKafkaProducer, records: list[Encoded]
) -> list[tuple[asyncio.Future[RecordMetadata], int]]:
    """Send ``records`` in the open transaction: each partition's keyed records as one batch
    (:func:`~agentledger.bus.batching.by_partition`; a second batch when one is full), the
    unkeyed ones one by one. Each future resolves to the metadata of its first record; the
    int is how many records it carries."""
    partitions = {
        topic: list(await producer.partitions_for(topic)) for topic in {r[0] for r in records}
    }
    groups, unkeyed = by_partition(records, partitions)
    sent: list[tuple[asyncio.Future[RecordMetadata], int]] = []
    for (topic, partition), items in groups.items():
        builder = producer.create_batch()
        for key, value in items:
            if builder.append(timestamp=None, key=key, value=value) is None:  # full
                future = await producer.send_batch(builder, topic, partition=partition)
                sent.append((future, builder.record_count()))
                builder = producer.create_batch()
                builder.append(timestamp=None, key=key, value=value)  # the first always fits
        future = await producer.send_batch(builder, topic, partition=partition)
        sent.append((future, builder.record_count()))
    for topic, no_key, value in unkeyed:
        sent.append((await producer.send(topic, value=value, key=no_key), 1))
    return sent
