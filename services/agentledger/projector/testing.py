"""Test and bench helpers: sample runs, and projector instances as real child processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import aiohttp
from aiokafka import AIOKafkaConsumer

from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.events.codec import EventCodec
from agentledger.events.models import (
    AcceptanceEvaluated,
    ActivityRecorded,
    EffectIntended,
    EffectRecorded,
    Event,
    RunEvent,
    RunFinished,
    RunStarted,
    StepCheckpointed,
    StepStarted,
    now_ms,
)
from agentledger.events.topics import topic_specs
from agentledger.kafkaclient import kafka_options
from agentledger.projector.settings import ProjectorSettings
from agentledger.redisclient import redis_client
from agentledger.settings import ArgumentsOnly, CommonSettings, environment_of
from agentledger.tasks import within
from agentledger.views.fold import fold
from agentledger.views.model import RunView

T = TypeVar("T")


def sample_run(
    run_id: str,
    steps: int = 2,
    *,
    fence: int = 1,
    first_seq: int = 1,
    finish: bool = True,
    start_ms: int | None = None,
) -> list[RunEvent]:
    """A gapless run over all three topics: per step an activity with cost, an effect with its
    outcome, an acceptance check and the checkpoint; then RunFinished (times from now on)."""
    out: list[RunEvent] = []
    base = now_ms() if start_ms is None else start_ms

    def env() -> dict[str, Any]:
        return {
            "run_id": run_id,
            "seq": first_seq + len(out),
            "fence": fence,
            "worker_id": f"w{fence}",
            "occurred_at": base + len(out),
        }

    out.append(RunStarted(**env(), agent="bench", plan=[f"s{i}" for i in range(steps)]))
    for i in range(steps):
        key = f"{run_id}:{i}:pay:0"
        out.append(StepStarted(**env(), step=i, step_name=f"s{i}", attempt=1))
        out.append(
            ActivityRecorded(
                **env(), step=i, attempt=1, ordinal=0, name="llm", result_json='"ok"', tokens=7
            )
        )
        out.append(
            EffectIntended(
                **env(),
                step=i,
                ordinal=0,
                effect="pay",
                provider="sandbox",
                kind="payments",
                idempotency_key=key,
                identity_hash="i",
                payload_hash="p",
            )
        )
        out.append(
            EffectRecorded(**env(), step=i, effect="pay", idempotency_key=key, outcome="succeeded")
        )
        out.append(AcceptanceEvaluated(**env(), step=i, attempt=1, check="c", passed=True))
        out.append(StepCheckpointed(**env(), step=i, step_name=f"s{i}", attempt=1))
    if finish:
        out.append(RunFinished(**env(), status="succeeded"))
    return out


def expected_view(events: list[RunEvent]) -> RunView:
    """The view the projector must hold once it has applied ``events``."""
    return fold(RunView(run_id=events[0].run_id), events).view


async def until(
    get: Callable[[], Awaitable[T]], ok: Callable[[T], bool], timeout_s: float = 30.0
) -> T:
    """Poll ``get`` until ``ok`` holds or the timeout passes; return the last value."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    value = await get()
    while not ok(value) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
        value = await get()
    return value


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def settings_env(settings: ProjectorSettings) -> dict[str, str]:
    """``settings`` as the AGENTLEDGER_* variables a child process reads them from."""
    return environment_of(settings)


class ProjectorProcess:
    """``agentledger projector`` as a child process with its own web port; kill() is SIGKILL."""

    def __init__(self, settings: ProjectorSettings, *, name: str = "projector") -> None:
        self.settings = settings.model_copy(update={"projector_web_port": free_port()})
        self.name = name
        self.url = f"http://127.0.0.1:{self.settings.projector_web_port}"
        self._log = Path(tempfile.mkdtemp(prefix="al-projector-")) / f"{name}.log"
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def log_path(self) -> Path:
        """Where the child's output goes."""
        return self._log

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs (benchmarks read its CPU time)."""
        return None if self._proc is None else self._proc.pid

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
        if et is None:  # keep the child's log when something went wrong
            shutil.rmtree(self._log.parent, ignore_errors=True)
        group = self.settings.projector_group
        shutil.rmtree(self.settings.state_dir / "faust" / f"{group}-data", ignore_errors=True)

    async def start(self) -> None:
        """Spawn the child (environment: this process's, minus any AGENTLEDGER_*, plus ours)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTLEDGER_")}
        env.update(settings_env(self.settings))
        with self._log.open("ab") as out:
            self._proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "agentledger.cli",
                "projector",
                env=env,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        """Until the health page says the runtime is started (connected to Redis and Kafka)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            if self._proc is not None and self._proc.returncode is not None:
                msg = f"{self.name} exited with {self._proc.returncode}; see {self._log}"
                raise RuntimeError(msg)
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with (
                    aiohttp.ClientSession() as session,
                    session.get(f"{self.url}/health") as response,
                ):
                    if response.status == 200 or (await response.json()).get("started"):
                        return
            if asyncio.get_running_loop().time() > deadline:
                msg = f"{self.name} not ready after {timeout_s} s; see {self._log}"
                raise TimeoutError(msg)
            await asyncio.sleep(0.2)

    async def health(self) -> tuple[int, dict[str, Any]]:
        """The /health page: its status and body."""
        async with aiohttp.ClientSession() as session, session.get(f"{self.url}/health") as r:
            body: dict[str, Any] = await r.json()
            return r.status, body

    async def metrics(self) -> dict[str, Any]:
        """The /metrics page as JSON."""
        async with (
            aiohttp.ClientSession(headers={"Accept": "application/json"}) as session,
            session.get(f"{self.url}/metrics") as r,
        ):
            body: dict[str, Any] = await r.json()
            return body

    async def prometheus(self) -> str:
        """The /metrics page as Prometheus text (what a scraper or curl gets)."""
        async with aiohttp.ClientSession() as session, session.get(f"{self.url}/metrics") as r:
            return await r.text()

    async def wait(self, timeout_s: float = 60.0) -> int:
        """Until the child exits by itself; its exit code."""
        if self._proc is None:
            msg = f"{self.name} was not started"
            raise RuntimeError(msg)
        return await within(self._proc.wait(), timeout_s)

    def kill(self) -> None:
        """SIGKILL the child (no shutdown of any kind)."""
        if self._proc is not None and self._proc.returncode is None:
            self._proc.send_signal(signal.SIGKILL)

    async def stop(self) -> None:
        """SIGTERM, wait up to 20 s, then SIGKILL (idempotent)."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await within(proc.wait(), 20)
            except TimeoutError:
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
        else:
            await proc.wait()
        self._proc = None


class _InitOnlySettings(ArgumentsOnly, ProjectorSettings):
    """ProjectorSettings built from arguments only: the environment cannot leak into a test."""


def projector_settings(common: CommonSettings, **overrides: Any) -> ProjectorSettings:
    """Projector settings on ``common``'s endpoints, topics and keys, plus ``overrides``."""
    values = common.model_dump()
    values.update(overrides)
    return _InitOnlySettings(**values)


async def read_events(
    bootstrap: str,
    topic: str,
    *,
    want: Callable[[list[Event]], bool],
    timeout_s: float = 30.0,
    settings: CommonSettings | None = None,
) -> list[Event]:
    """Decode ``topic`` from the start (read_committed) until ``want(events)`` or the timeout."""
    codec = EventCodec()
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        enable_auto_commit=False,
        **kafka_options(settings),
    )
    await consumer.start()
    found: list[Event] = []
    try:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while not want(found):
            if asyncio.get_running_loop().time() > deadline:
                return found
            batch = await consumer.getmany(timeout_ms=200)
            for messages in batch.values():
                found.extend(codec.decode(m.value) for m in messages)
    finally:
        await consumer.stop()
    return found


@contextlib.asynccontextmanager
async def isolated_projector(
    kafka_bootstrap: str, redis_url: str, **overrides: Any
) -> AsyncIterator[ProjectorSettings]:
    """Settings with their own topics (created here, deleted after) and Redis key prefix."""
    tag = f"p{uuid.uuid4().hex[:10]}"
    base = CommonSettings.model_construct(
        kafka_bootstrap=kafka_bootstrap,
        redis_url=redis_url,
        topic_prefix=f"{tag}.",
        key_prefix=tag,
    )
    settings = projector_settings(base, projector_group=f"{tag}-projector", **overrides)
    specs = topic_specs(settings)
    await ensure_topics(settings, specs)
    try:
        yield settings
    finally:
        await delete_topics(settings, [s.name for s in specs])
        client = redis_client(redis_url, settings=settings)
        try:
            keys = [k async for k in client.scan_iter(match=f"{tag}:*", count=1000)]
            for i in range(0, len(keys), 1000):
                await client.delete(*keys[i : i + 1000])
        finally:
            await client.aclose()
