"""Test and bench helpers of the fleet: isolated settings, worker processes, reading Kafka back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from aiokafka import AIOKafkaConsumer, TopicPartition

from agentledger.errors import ConfigurationError
from agentledger.events.codec import EventCodec
from agentledger.events.models import Alert, Event, RunEvent
from agentledger.events.topics import topic_names
from agentledger.fleet.agent import Agent
from agentledger.fleet.settings import FleetSettings
from agentledger.fleet.worker import FleetWorker
from agentledger.kafkaclient import kafka_options
from agentledger.settings import ArgumentsOnly, CommonSettings, environment_of
from agentledger.tasks import within
from agentledger.views import RunView, fold

T = TypeVar("T")
_STOP_S = 20.0


class _InitOnlyFleetSettings(ArgumentsOnly, FleetSettings):
    """FleetSettings from arguments only: the environment cannot leak into a test."""


def fleet_settings(common: CommonSettings, **overrides: Any) -> FleetSettings:
    """Fleet settings on ``common``'s endpoints, topics and keys, plus ``overrides``."""
    return _InitOnlyFleetSettings(**{**common.model_dump(), **overrides})


def settings_env(settings: FleetSettings) -> dict[str, str]:
    """``settings`` as the AGENTLEDGER_* variables a child process reads them from."""
    return environment_of(settings)


async def wait_until(
    get: Callable[[], Awaitable[T]],
    ok: Callable[[T], bool],
    *,
    timeout_s: float,
    poll_s: float = 0.25,
) -> T:
    """Poll ``get`` until ``ok`` holds or ``timeout_s`` passes; return the last value."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    value = await get()
    while not ok(value) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(poll_s)
        value = await get()
    return value


@contextlib.asynccontextmanager
async def running_worker(settings: FleetSettings, agent: Agent) -> AsyncIterator[FleetWorker]:
    """A fleet worker serving in this process (a task) until the block ends."""
    worker = FleetWorker(settings, agent)
    stop = asyncio.Event()
    task = asyncio.get_running_loop().create_task(worker.serve(stop), name=settings.worker_id)
    try:
        yield worker
    finally:
        stop.set()
        await task


class WorkerProcess:
    """``agentledger worker`` as a child process; SIGKILL, SIGSTOP and SIGCONT on demand."""

    def __init__(
        self, settings: FleetSettings, agent: str, *, log_dir: Path, concurrency: int = 16
    ) -> None:
        self.settings = settings
        self.agent = agent
        self.worker_id = settings.worker_id
        self.concurrency = concurrency
        self.log_path = log_dir / f"{self.worker_id}.log"
        self._proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    @property
    def pid(self) -> int:
        """The child's process id."""
        if self._proc is None:
            msg = f"worker {self.worker_id} is not running"
            raise RuntimeError(msg)
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The exit code once the child has ended (negative: killed by that signal)."""
        return None if self._proc is None else self._proc.returncode

    async def start(self) -> None:
        """Spawn the child (this process's environment minus AGENTLEDGER_*, plus ours)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
        env.update(settings_env(self.settings))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "agentledger.cli", "--log-format", "json", "worker",
                "--agent", self.agent, "--concurrency", str(self.concurrency),
                env=env, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
                start_new_session=True,
            )  # fmt: skip

    def assigned(self) -> set[tuple[str, int]] | None:
        """The request partitions the worker logged it was last given (None: not yet)."""
        last: set[tuple[str, int]] | None = None
        if not self.log_path.exists():
            return None
        for line in self.log_path.read_text(errors="replace").splitlines():
            if '"requests_assigned"' not in line:
                continue
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                last = {(str(t), int(p)) for t, p in record.get("partitions", [])}
        return last

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the child if it still runs."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no shutdown of any kind."""
        self.signal(signal.SIGKILL)

    def freeze(self) -> None:
        """SIGSTOP: the process stops mid-instruction, holding whatever it held."""
        self.signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT: the frozen process goes on as if nothing happened."""
        self.signal(signal.SIGCONT)

    async def stop(self) -> None:
        """SIGCONT + SIGTERM, wait, then SIGKILL (idempotent)."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            try:
                await within(proc.wait(), _STOP_S)
            except TimeoutError:
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
        self._proc = None


async def read_topics(
    settings: CommonSettings, topics: list[str], *, timeout_s: float = 60.0
) -> list[tuple[TopicPartition, int, Event]]:
    """Every committed record of ``topics`` up to their current end, decoded, in offset order
    per partition (undecodable records raise)."""
    if settings.kafka_bootstrap is None:
        raise ConfigurationError("resolve kafka_bootstrap before reading topics")
    codec = EventCodec()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.kafka_bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        **kafka_options(settings),
    )
    await consumer.start()
    out: list[tuple[TopicPartition, int, Event]] = []
    try:
        tps = [TopicPartition(t, p) for t in topics for p in sorted(await _partitions(consumer, t))]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        remaining = {tp for tp in tps if ends[tp] > 0}
        deadline = asyncio.get_running_loop().time() + timeout_s
        while remaining and asyncio.get_running_loop().time() < deadline:
            batches = await consumer.getmany(*remaining, timeout_ms=200)
            for tp, records in batches.items():
                out.extend(
                    (tp, r.offset, codec.decode(r.value)) for r in records if r.offset < ends[tp]
                )
            for tp in list(remaining):
                if await consumer.position(tp) >= ends[tp]:
                    remaining.discard(tp)
    finally:
        await consumer.stop()
    return out


async def _partitions(consumer: AIOKafkaConsumer, topic: str) -> set[int]:
    cluster = await consumer._client.fetch_all_metadata()
    return set(cluster.partitions_for_topic(topic) or ())


async def run_events(settings: CommonSettings) -> dict[str, list[RunEvent]]:
    """Every committed run event of the deployment, by run."""
    by_run: dict[str, list[RunEvent]] = defaultdict(list)
    for _, _, event in await read_topics(settings, list(topic_names(settings).run_topics)):
        if isinstance(event, RunEvent):
            by_run[event.run_id].append(event)
    return dict(by_run)


async def fold_runs(settings: CommonSettings) -> dict[str, RunView]:
    """Every run folded from Kafka (what a cold machine would rebuild)."""
    return {
        run_id: fold(RunView(run_id=run_id), events).view
        for run_id, events in (await run_events(settings)).items()
    }


async def alerts(settings: CommonSettings) -> list[Alert]:
    """Every alert event on the alerts topic."""
    found = await read_topics(settings, [topic_names(settings).alerts])
    return [e for _, _, e in found if isinstance(e, Alert)]
