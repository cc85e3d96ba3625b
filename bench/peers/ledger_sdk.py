"""agentledger through its worker SDK on the local stack: each step performs one effect
(intent committed before the in-process provider call) and returns the ~1 KB message, which
is checkpointed with the outcome and the acceptance in one transaction. A projector process
folds the run topics into Redis views while the namespace is measured; resume reads them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

from agentledger._core.ports import WorkerPorts
from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.events.topics import topic_names, topic_specs
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Ledger, RunSpec, Step, WorkerSettings
from bench.peers.base import Env, Kind, Peer, PeerUnavailableError, Probe, acts_at, safe_name
from bench.peers.kafka_size import topic_bytes
from bench.workload import message

AGENT = "bench"
PROJECTOR_STOP_S = 30.0


def plan_of(steps: int) -> list[str]:
    """The run's plan: one named step per step."""
    return [f"s{i:05d}" for i in range(steps)]


@asynccontextmanager
async def fresh_namespace(env: Env, settings: WorkerSettings, log_name: str) -> AsyncIterator[None]:
    """The namespace's topics deleted and made again, its Redis keys wiped, and a projector
    process folding its run topics into views (logging to ``log_name`` in the work dir)."""
    specs = topic_specs(settings)
    await delete_topics(settings, [s.name for s in specs])
    views = RedisViewStore.from_url(settings.redis_url or "", key_prefix=settings.key_prefix)
    try:
        async for key in views.client.scan_iter(match=f"{settings.key_prefix}:*"):
            await views.client.delete(key)
    finally:
        await views.close()
    await ensure_topics(settings, specs)
    async with projector(env, settings, Path(env.work_dir) / log_name):
        yield


def settings_for(env: Env, namespace: str, **overrides: Any) -> WorkerSettings:
    """The worker settings of one namespace: its own topics, keys, stable worker and producer
    ids (a resuming process is the crashed worker restarted, so it may take its lease back)."""
    if env.kafka_bootstrap is None or env.redis_url is None:
        raise PeerUnavailableError("agentledger needs the local stack (Kafka and Redis)")
    tag = "bench-sdk-" + safe_name(namespace)
    return WorkerSettings(
        kafka_bootstrap=env.kafka_bootstrap,
        redis_url=env.redis_url,
        topic_prefix=f"{tag}.",
        key_prefix=tag,
        worker_id=f"{tag}-worker",
        transactional_id=f"{tag}-producer",
        log_level="WARNING",
        **overrides,
    )


@asynccontextmanager
async def projector(env: Env, settings: WorkerSettings, log_file: Path) -> AsyncIterator[None]:
    """One ``agentledger projector`` process on the namespace's topics and keys."""
    exe = Path(sys.executable).with_name("agentledger")
    child_env = {
        **os.environ,
        "AGENTLEDGER_KAFKA_BOOTSTRAP": settings.kafka_bootstrap or "",
        "AGENTLEDGER_REDIS_URL": settings.redis_url or "",
        "AGENTLEDGER_TOPIC_PREFIX": settings.topic_prefix,
        "AGENTLEDGER_KEY_PREFIX": settings.key_prefix,
        "AGENTLEDGER_PROJECTOR_GROUP": f"{settings.key_prefix}-projector",
        "AGENTLEDGER_PROJECTOR_WEB_ENABLED": "false",
        "AGENTLEDGER_LOG_LEVEL": "WARNING",
    }
    with log_file.open("ab") as out:
        proc = await asyncio.create_subprocess_exec(
            str(exe),
            "projector",
            env=child_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=env.work_dir,
            start_new_session=True,
        )
        try:
            yield
        finally:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), PROJECTOR_STOP_S)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()


def step_body(run_id: str) -> Callable[[Step], Awaitable[Any]]:
    """The bench's step: one effect (the sandbox's ``emails``), then the ~1 KB message."""

    async def body(step: Step) -> Any:
        text = message(run_id, step.index + 1)
        request = EffectRequest(
            kind="emails",
            identity={"run": run_id, "step": step.index},
            free_text={"body": text[:64]},
        )
        await step.effect("notify", request)
        return {"role": "assistant", "content": text}

    return body


class _LeftUnfinished(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Leaves a resumed run unfinished after its first new step."""


class LedgerSdkPeer(Peer):
    """Ledger.run / Run.step / Step.effect, as an agent author writes them."""

    name: ClassVar[str] = "agentledger"
    kind: ClassVar[Kind] = "ours"
    #: The worker settings this row is measured with (issue 12's write path).
    overrides: ClassVar[dict[str, Any]] = {"checkpoints": "with_next_commit", "run_index": True}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = settings_for(self.env, self.namespace, **self.overrides)
        self._stack: AsyncExitStack | None = None
        self._ledger: Ledger | None = None
        self._views: RedisViewStore | None = None

    @classmethod
    @asynccontextmanager
    async def sidecar(cls, env: Env, namespace: str) -> AsyncIterator[None]:
        """Fresh run topics and a projector folding them into Redis views."""
        log_name = f"projector-{safe_name(namespace)}.log"
        async with fresh_namespace(env, settings_for(env, namespace), log_name):
            yield

    async def start(self) -> None:
        """Open the worker's ports (producer, leases) and the view reader (a fresh namespace
        makes its topics first; a resuming process, the crashed worker restarted, finds them)."""
        if self.fresh:
            await ensure_topics(self.settings, topic_specs(self.settings))
        stack = self._stack = AsyncExitStack()
        try:
            # The worker's own ports: one Redis client for leases and views whose pool waits
            # for a free connection (redis_max_connections), and the group-commit log.
            # As agentledger.connect() opens them: the producer's start goes on while a resume
            # reads Redis.
            ports = await stack.enter_async_context(
                WorkerPorts(self.settings, kafka_in_background=True)
            )
        except BaseException:
            await self.stop()
            raise
        views, leases, log = ports.views, ports.leases, ports.log
        self._views = views if isinstance(views, RedisViewStore) else None
        self._ledger = Ledger.from_settings(
            self.settings,
            log=log,
            leases=leases,
            providers={"sandbox": MemoryProvider(name="sandbox")},
            views=views,
            runs=ports.runs,
        )

    async def stop(self) -> None:
        """Close the ports (idempotent)."""
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    @property
    def ledger(self) -> Ledger:
        """The ledger of this peer."""
        if self._ledger is None:
            raise PeerUnavailableError("the agentledger peer is not started")
        return self._ledger

    async def run(self, run_id: str, steps: int, probe: Probe | None = None) -> list[float]:
        """One run: each step performs its effect and returns its message."""
        plan = plan_of(steps)
        out: list[float] = []
        body = step_body(run_id)
        opening = time.perf_counter()
        async with self.ledger.run(RunSpec(run_id=run_id, agent=AGENT, plan=plan)) as run:
            self.open_s.append(time.perf_counter() - opening)
            for k, name in enumerate(plan):
                if probe is not None and acts_at(probe, k):
                    # A probe measures (or crashes) after k durable steps: commit the queued
                    # checkpoint first (with_next_commit). The latency runs have no probe, the
                    # bytes runs' probes act only at their marks: the steps between them commit
                    # as an agent's do (one transaction per effect step).
                    await run.sync()
                    await probe(k)
                start = time.perf_counter()
                await run.step(name, body)
                out.append(time.perf_counter() - start)
        return out

    async def resume(self, run_id: str, steps_done: int, probe: Probe) -> None:
        """Open the crashed run: view from Redis behind the barrier (or Kafka), lease, versions,
        RunResumed committed, open intents resolved — then it is ready for its next step."""
        spec = RunSpec(run_id=run_id, agent=AGENT, plan=plan_of(steps_done + 1))
        async with self.ledger.run(spec) as run:
            self.resume_detail = f"view from {run.resumed_from}"
            await probe(run.view.cursor)

    async def resume_and_step(
        self, run_id: str, steps_done: int, probe: Probe, stepped: Probe
    ) -> None:
        """:meth:`resume`, then what the resumed agent does next: its recorded steps replayed
        (each returns its checkpointed result) and the first step not checkpointed run, after
        which ``stepped`` is called; the run is then left unfinished (an error in the agent:
        its queued checkpoint committed, the lease released), resumable again one step on.
        The crashed run's plan must be longer than the steps it has done."""
        spec = RunSpec(run_id=run_id, agent=AGENT, plan=plan_of(steps_done + 1))
        body = step_body(run_id)
        with contextlib.suppress(_LeftUnfinished):
            async with self.ledger.run(spec) as run:
                self.resume_detail = f"view from {run.resumed_from}"
                cursor = run.view.cursor
                await probe(cursor)
                for name in run.view.plan[: cursor + 1]:
                    await run.step(name, body)
                await stepped(cursor)
                raise _LeftUnfinished

    async def stored_bytes(self) -> int:
        """Kafka segment bytes of the run topics plus Redis memory of the namespace's keys."""
        kafka = topic_bytes(self.env, topic_names(self.settings).run_topics)
        redis = 0
        if self._views is not None:
            client = self._views.client
            async for key in client.scan_iter(match=f"{self.settings.key_prefix}:*", count=1000):
                redis += int(await client.memory_usage(key, samples=0) or 0)
        return kafka + redis

    def notes(self) -> list[str]:
        """What this row measures."""
        return [
            "opening a new run = Ledger.run until its first step may run, timed over the "
            "latency runs and 20 one-step runs opened one after another",
            f"worker SDK, checkpoints={self.settings.checkpoints}, "
            f"run_index={self.settings.run_index}: "
            + (
                "1 commit per effect step (previous checkpoint+outcome+acceptance, then "
                "StepStarted+intent), the last checkpoint with RunFinished; "
                if self.settings.checkpoints == "with_next_commit"
                else "2 commits per step (intent; outcome+acceptance+checkpoint), "
            )
            + "Kafka acks=all transactional, 1 projector process folding into Redis views; "
            "bytes = Kafka segments + Redis MEMORY USAGE of the views and leases",
            "Redis: WorkerPorts' one client for leases and views, on a pool of "
            f"{self.settings.redis_max_connections} connections that makes callers wait",
            "resume reuses the crashed worker's id (a new worker id would first wait out the "
            f"lease ttl, {self.settings.lease_ttl_ms} ms)",
        ]


class LedgerBeforePeer(LedgerSdkPeer):
    """The same SDK with issue 12's changes of the step and open paths turned off: each step's
    checkpoint committed at once, new runs opened by reading the log (the reader's metadata and
    the fence check beside the transaction cannot be turned off: they are in both rows)."""

    name: ClassVar[str] = "agentledger-before"
    kind = "peer"
    overrides: ClassVar[dict[str, Any]] = {"checkpoints": "each_step", "run_index": False}
