"""``agentledger worker``: one process of the fleet, running up to N runs of one agent at once.

All runs share one transactional producer (the KafkaEventLog's group commit), one lease store
(the fence guard) and one consumer-group membership on ``runs.requests``. Requests for the same
run are carried out one after the other; different runs concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import structlog

from agentledger._core.ports import WorkerPorts
from agentledger.bus.publisher import KafkaPublisher
from agentledger.errors import ProducerFencedError, PublishError
from agentledger.events.models import DeadLettered
from agentledger.fleet.agent import Agent
from agentledger.fleet.alerts import worker_fenced_alert
from agentledger.fleet.executor import Outcome, RunExecutor
from agentledger.fleet.requests import Request, RequestConsumer
from agentledger.fleet.settings import FleetSettings
from agentledger.fleet.stable import StableBarrier
from agentledger.fleet.tap import DurableTap
from agentledger.outage import ride_out
from agentledger.telemetry.prom import serving_metrics
from agentledger.telemetry.worker_metrics import WorkerMetrics
from agentledger.worker import Ledger

_log = structlog.get_logger("agentledger.fleet")


def group_of(settings: FleetSettings, agent: Agent) -> str:
    """The consumer group of an agent's workers."""
    return settings.fleet_group or f"{settings.topic_prefix}fleet.{agent.name}"


class FleetWorker:
    """Consumes run requests and carries them out until ``stop`` is set (see :meth:`serve`)."""

    def __init__(self, settings: FleetSettings, agent: Agent) -> None:
        self.settings = settings
        self.agent = agent
        self.worker_id = settings.worker_id
        self.outcomes: dict[str, Outcome] = {}  # the last outcome of each run
        self.history: list[tuple[str, Outcome]] = []  # every request's, in order
        self._active: dict[str, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._fatal: ProducerFencedError | None = None
        self._log = _log.bind(worker_id=self.worker_id, agent=agent.name)
        self.metrics_url: str | None = None  # set while serving with fleet_metrics_port

    async def serve(
        self, stop: asyncio.Event, *, started: Callable[[], None] | None = None
    ) -> None:
        """Run until ``stop``; then let in-flight runs finish for ``fleet_drain_s``, cancel the
        rest (their leases expire), commit settled offsets and close. Raises ProducerFencedError
        if the worker had to stop because its producer was fenced.

        ``started`` is called once the worker is set up (its clients, consumer and metrics made),
        before the first request: the ``agentledger worker`` process tunes its collector there
        (a host that embeds the worker keeps its own policy)."""
        s = self.settings
        async with AsyncExitStack() as stack:
            # Leases and views share the ports' one Redis client, whose pool waits when full.
            ports = await stack.enter_async_context(WorkerPorts(s))
            views = ports.views
            providers = self.agent.providers()
            for provider in providers.values():
                await stack.enter_async_context(provider)
            publisher = await stack.enter_async_context(
                KafkaPublisher(s, client_id=f"agentledger-fleet-{self.worker_id}")
            )
            barrier = await stack.enter_async_context(
                StableBarrier(s, timeout_s=s.fleet_stable_timeout_s)
            )
            tap = DurableTap(ports.log)
            metrics = await self._metrics(stack)
            ledger = Ledger.from_settings(
                s, log=tap, leases=ports.leases, providers=providers, views=views,
                runs=ports.runs, metrics=metrics,
            )  # fmt: skip
            executor = RunExecutor(
                s, agent=self.agent, ledger=ledger, tap=tap, leases=ports.leases,
                publisher=publisher, views=views, barrier=barrier,
            )  # fmt: skip
            consumer = await stack.enter_async_context(RequestConsumer(s, group_of(s, self.agent)))
            self._log.info(
                "worker_started", group=consumer.group_id, concurrency=s.fleet_concurrency
            )
            if started is not None:
                started()
            await self._loop(consumer, executor, publisher, stop)
        if self._fatal is not None:
            raise self._fatal
        self._log.info("worker_stopped")

    async def _metrics(self, stack: AsyncExitStack) -> WorkerMetrics | None:
        """The worker's metrics, served on ``fleet_metrics_port`` (None when it is unset)."""
        port = self.settings.fleet_metrics_port
        if port is None:
            return None
        metrics = WorkerMetrics()

        async def render() -> bytes:
            return metrics.render()

        self.metrics_url = await stack.enter_async_context(
            serving_metrics(self.settings.fleet_metrics_host, port, render)
        )
        return metrics

    async def _loop(
        self,
        consumer: RequestConsumer,
        executor: RunExecutor,
        publisher: KafkaPublisher,
        stop: asyncio.Event,
    ) -> None:
        committer = asyncio.get_running_loop().create_task(self._commit_forever(consumer))
        try:
            while not stop.is_set() and self._fatal is None:
                free = self.settings.fleet_concurrency - len(self._tasks)
                # The broker went away: runs carry on, and fetching waits up to the outage
                # budget (past it, UnreachableError stops the worker).
                requests = await ride_out(
                    functools.partial(consumer.fetch, free),
                    dependency="Kafka",
                    endpoint=self.settings.kafka_bootstrap or "",
                    budget_s=self.settings.outage_budget_s,
                )
                for request in requests:
                    task = asyncio.get_running_loop().create_task(
                        self._handle(request, consumer, executor, publisher)
                    )
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
            await self._drain(0 if self._fatal is not None else self.settings.fleet_drain_s)
        finally:
            committer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await committer
            await self._drain(0)
        if self._fatal is not None:
            await _publish_quietly(
                publisher, [worker_fenced_alert(self.worker_id, str(self._fatal))]
            )

    async def _drain(self, grace_s: float) -> None:
        tasks = set(self._tasks)
        if not tasks:
            return
        if grace_s > 0:
            await asyncio.wait(tasks, timeout=grace_s)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _commit_forever(self, consumer: RequestConsumer) -> None:
        while True:
            await asyncio.sleep(self.settings.fleet_commit_interval_ms / 1000)
            await consumer.commit()

    async def _handle(
        self,
        request: Request,
        consumer: RequestConsumer,
        executor: RunExecutor,
        publisher: KafkaPublisher,
    ) -> None:
        event = request.event
        if event is None:
            await self._dead_letter(request, consumer, publisher)
            return
        run_id = event.run_id
        log = self._log.bind(run_id=run_id, request=type(event).__name__, offset=request.offset)
        previous = self._active.get(run_id)
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._active[run_id] = mine
        try:
            if previous is not None:
                await previous  # one request of a run at a time in this process
            outcome = await executor.execute(event, lambda: consumer.settle(request))
            self.outcomes[run_id] = outcome
            self.history.append((run_id, outcome))
            log.info("request_done", status=outcome.status, detail=outcome.detail)
        except ProducerFencedError as e:
            self._fatal = self._fatal or e
            log.error("producer_fenced", error=str(e))
        except Exception:  # one run's failure must not stop the worker
            log.exception("request_failed")
        finally:
            mine.set_result(None)
            if self._active.get(run_id) is mine:
                del self._active[run_id]

    async def _dead_letter(
        self, request: Request, consumer: RequestConsumer, publisher: KafkaPublisher
    ) -> None:
        topic, partition = request.tp
        record = DeadLettered(
            reason=f"{request.error} (consumer group {consumer.group_id})",
            source_topic=topic,
            source_partition=partition,
            source_offset=request.offset,
            key=request.key,
            value=request.value,
        )
        try:
            await publisher.publish([record])
        except PublishError as e:
            self._log.error("dead_letter_failed", offset=request.offset, error=str(e))
            return
        self._log.warning("request_dead_lettered", offset=request.offset, reason=request.error)
        consumer.settle(request)


async def _publish_quietly(publisher: KafkaPublisher, events: list[Any]) -> None:
    try:
        await publisher.publish(events)
    except PublishError as e:
        _log.error("alert_publish_failed", error=str(e))
