"""The projector as a faust-streaming app: one task folds batches of the three run topics.

faust runs the app, its web server and the consumer group (with its co-partitioning assignor);
the run topics' records are taken beneath its per-event path, a whole fetch at a time
(intake.py).

Three faust behaviours are changed on purpose, each documented where it is done:

- faust's Kafka consumer reads ``read_uncommitted`` unless the app runs with
  ``processing_guarantee="exactly_once"`` (``AIOKafkaConsumerThread._create_worker_consumer``
  in faust 0.15.3); exactly-once would also make faust open a transactional producer per
  partition, which the projector does not need (its output is Redis). The transport below
  keeps at-least-once delivery but sets the consumer to ``read_committed`` before it starts,
  so aborted or still-open transactions never reach the fold.
- faust uses its own partition assignor (which co-partitions topics with the same partition
  count and subscribers) only when ``table_standby_replicas > 0`` or the app has changelog
  tables; otherwise it falls back to aiokafka's round-robin assignor, which does not keep
  partition ``p`` of every run topic on one member. ``table_standby_replicas=1`` keeps faust's
  assignor; tests/integration/test_projector_group.py checks the outcome with live instances.
- faust's worker puts a terminal spinner on the root logger and sets that logger to DEBUG for
  the life of the process (:class:`ProjectorWorker` does not): every debug line of aiokafka and
  faust was then built as a record and dropped by the handlers.
"""

from __future__ import annotations

import asyncio
from typing import Any

import faust
import mode
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread, Transport

from agentledger._core.gc_tuning import SurvivorFreezer, collector_paused, tune_collector
from agentledger.errors import ConfigurationError
from agentledger.kafkaclient import faust_credentials
from agentledger.projector.intake import BulkConsumer, Intake, commit_positions
from agentledger.projector.ports import Record
from agentledger.projector.prometheus import metrics_view
from agentledger.projector.runtime import ProjectorRuntime
from agentledger.projector.settings import ProjectorSettings

READ_COMMITTED = "read_committed"
#: How often the projector's positions are committed as the group's offsets (where a restart
#: resumes delivery; Redis holds the progress).
COMMIT_EVERY_S = 1.0


class ProjectorWorker(faust.Worker):
    """faust's worker without its terminal spinner, whose log handler set the root logger to
    DEBUG: aiokafka's fetcher and connections then built a record for each of their debug lines
    (several a fetch; ~4 % of a projector's CPU at 1,000 runs/s, DESIGN.md §16, session 14),
    which the handlers, at the configured level, dropped. The root logger keeps that level."""

    def on_setup_root_logger(self, logger: Any, level: int) -> None:
        """No spinner and no handler of its own: what logging is configured stays as it is."""
        self.spinner = None


class _ReadCommittedConsumerThread(AIOKafkaConsumerThread):
    """faust's consumer thread, with the consumer switched to read_committed before start."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        if not hasattr(consumer, "_isolation_level"):
            msg = "this aiokafka has no _isolation_level: cannot make faust read committed"
            raise ConfigurationError(msg)
        consumer._isolation_level = READ_COMMITTED
        return consumer


class _ReadCommittedConsumer(BulkConsumer):
    def _new_consumer_thread(self) -> AIOKafkaConsumerThread:
        return _ReadCommittedConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _ReadCommittedTransport(Transport):
    Consumer = _ReadCommittedConsumer


class ProjectorApp(faust.App):
    """faust.App whose consumers read committed records only, the run topics' in bulk."""

    intake: Intake | None = None

    def _new_transport(self) -> Any:
        return _ReadCommittedTransport(self.conf.broker_consumer, self)


class _Resources(mode.Service):
    """Starts the runtime with the worker and closes it when the worker stops."""

    def __init__(self, runtime: ProjectorRuntime, **kwargs: Any) -> None:
        self._runtime = runtime
        super().__init__(**kwargs)

    async def on_start(self) -> None:
        await self._runtime.start()
        tune_collector()  # the process is set up: what exists now lives as long as it does

    async def on_stop(self) -> None:
        await self._runtime.stop()


def _record(event: Any) -> Record:
    message = event.message
    return Record(message.topic, message.partition, message.offset, message.key, message.value)


def build_app(settings: ProjectorSettings, runtime: ProjectorRuntime) -> faust.App:
    """The faust app of one projector instance (run it with ``faust.Worker``)."""
    if settings.kafka_bootstrap is None:
        msg = "kafka_bootstrap must be resolved before building the projector app"
        raise ConfigurationError(msg)
    brokers = [f"kafka://{hp.strip()}" for hp in settings.kafka_bootstrap.split(",")]
    faust_dir = settings.state_dir / "faust"  # faust's data dir (unused: no tables), not in cwd
    faust_dir.mkdir(parents=True, exist_ok=True)
    app = ProjectorApp(
        settings.projector_group,
        broker=brokers,
        store="memory://",
        datadir=str(faust_dir / "{conf.id}-data"),
        autodiscover=False,
        topic_partitions=settings.run_partitions,
        topic_allow_declare=False,
        topic_disable_leader=True,
        consumer_auto_offset_reset="earliest",
        table_standby_replicas=1,
        producer_acks=-1,
        broker_commit_interval=1.0,
        # a getmany drains every partition's fetched records (not a batch's worth, which came
        # topic by topic): the intake cuts them into batches of whole partition numbers
        broker_max_poll_records=None,
        broker_session_timeout=settings.projector_session_timeout_ms / 1000,
        broker_heartbeat_interval=settings.projector_session_timeout_ms / 5000,
        web_enabled=settings.projector_web_enabled,
        web_bind=settings.projector_web_host,
        web_host=settings.projector_web_host,
        web_port=settings.projector_web_port,
        worker_redirect_stdouts=False,
        broker_credentials=faust_credentials(settings),
    )
    channel = app.topic(
        *runtime.run_topics,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )
    # The run topics' records are taken beneath faust, a whole fetch at a time (intake.py);
    # the agent stays subscribed so that faust's group gives this instance its partitions.
    # One task folds whatever has queued up since its last batch (group-commit style): at low
    # load a record waits for no timer, under load batches grow by themselves.
    intake = Intake(
        runtime.run_topics,
        batch_max=settings.projector_batch_max,
        linger_s=settings.projector_linger_ms / 1000,
    )
    app.intake = intake

    async def fold_stream(stream: Any) -> None:
        async for event in stream.events():  # only if the bulk path were off: same records
            await runtime.process([_record(event)])

    async def fold_batches() -> None:
        # no collection inside a batch (its objects are alive until it ends) and none that
        # walks the run cache: after it, one of what it left, and its survivors frozen
        # (DESIGN.md §16, session 16)
        survivors = SurvivorFreezer()
        while True:
            batch = await intake.batch()
            with collector_paused():
                await runtime.process(batch)
                survivors.after_batch()  # before the collector is on again

    app.agent(channel, name="agentledger-projector-fold")(fold_stream)
    app.task(fold_batches)
    committed_at = [0.0]

    async def tick() -> None:
        await runtime.tick()
        loop = asyncio.get_running_loop()
        if runtime.ready.is_set() and loop.time() - committed_at[0] >= COMMIT_EVERY_S:
            committed_at[0] = loop.time()
            await commit_positions(app.consumer, runtime.positions())

    app.timer(interval=settings.projector_tick_ms / 1000)(tick)

    async def assigned(_sender: Any, /, *args: Any, signal: Any, **_: Any) -> None:
        runtime.assign((tp.topic, tp.partition) for tp in args[0])

    async def revoked(_sender: Any, /, *args: Any, signal: Any, **_: Any) -> None:
        runtime.revoke((tp.topic, tp.partition) for tp in args[0])

    app.on_partitions_assigned.connect(assigned)
    app.on_partitions_revoked.connect(revoked)

    async def health_page(view: Any, _request: Any) -> Any:
        health = await runtime.health()
        body = {
            "ok": health.ok,
            "started": health.started,
            "problems": health.problems,
            "namespace": runtime.metrics.namespace,
        }
        return view.json(body, status=200 if health.ok else 503)

    app.page("/metrics")(metrics_view(runtime))
    app.page("/health")(health_page)
    # faust starts service instances too (App._prepare_subservice), not only classes
    app.service(_Resources(runtime))  # type: ignore[arg-type]
    return app
