"""The reconciler on the real Kafka, Redis, projector and a sandbox provider subprocess.

Open intents are made the way a worker killed mid-effect leaves them: RunStarted, StepStarted and
EffectIntended written under a lease that then expires, with the effect performed at the sandbox
(commit-then-drop) or never sent. The "later resume" is the real worker SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from redis.asyncio import Redis

from agentledger._core.keys import effect_key
from agentledger.bus.admin import delete_topics, ensure_topics
from agentledger.bus.consumer import KafkaEventConsumer
from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import ProviderUnavailableError
from agentledger.events.models import (
    Alert,
    EffectIntended,
    EffectRecorded,
    Event,
    ResumeRequested,
    RunEvent,
    RunFinished,
    RunStarted,
    StepRejected,
    StepStarted,
)
from agentledger.events.topics import topic_names, topic_specs
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.projector.testing import ProjectorProcess, projector_settings
from agentledger.providers.faults import FaultRule
from agentledger.providers.http import HttpProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.providers.sandbox.client import SandboxClient, SandboxEffect
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.reconciler.app import ReconcilerApp, open_reconciler
from agentledger.reconciler.settings import ProviderPolicy, ReconcilerSettings
from agentledger.settings import ArgumentsOnly, CommonSettings
from agentledger.views.model import RunView
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Ledger, RunSpec, Step

pytestmark = pytest.mark.integration

REQUEST = EffectRequest(
    kind="payments", identity={"amount": 1250, "currency": "EUR", "customer": "c-42"}
)
EFFECT = "charge"


class TestReconcilerSettings(ArgumentsOnly, ReconcilerSettings):
    """ReconcilerSettings from explicit values only: the environment cannot leak in."""

    __test__ = False


def reconciler_settings(
    common: CommonSettings, url: str, name: str, **extra: Any
) -> ReconcilerSettings:
    """Settings of one reconciler instance on the test's topics, keys and sandbox."""
    values: dict[str, Any] = {
        **common.model_dump(),
        "provider_url": url,
        "reconciler_id": name,
        "reconciler_intent_grace_ms": 0,
        "reconciler_orphan_grace_ms": 600_000,
        "reconciler_lease_ttl_ms": 30_000,
        "reconciler_poll_interval_s": 0.2,
        "reconciler_barrier_timeout_s": 10.0,
        "reconciler_default_provider": ProviderPolicy(
            attempts=1, timeout_s=5.0, backoff_base_ms=1, backoff_max_ms=5
        ),
        "alerts_log": False,
        **extra,
    }
    return TestReconcilerSettings(**values)


@contextlib.asynccontextmanager
async def projector(common: CommonSettings) -> AsyncIterator[RedisViewStore]:
    """The real projector service (``agentledger projector``) as a child process, and its views."""
    settings = projector_settings(common)
    assert settings.redis_url is not None
    async with ProjectorProcess(settings) as process:
        await process.wait_ready()
        async with RedisViewStore.from_url(
            settings.redis_url, key_prefix=settings.key_prefix
        ) as views:
            yield views


async def eventually(
    check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 60
) -> None:
    """Poll ``check`` until true (the projector is asynchronous); fail naming ``what``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


@dataclass
class Env:
    """The test's stack: settings, sandbox, views, and a worker that dies after its intents."""

    common: CommonSettings
    sandbox: SandboxProcess
    client: SandboxClient
    views: RedisViewStore
    leases: RedisLeaseStore
    log: KafkaEventLog

    async def dying_worker(self, run_id: str, *, perform: bool, worker: str = "w-dead") -> str:
        """A worker writes its intent, maybe performs it (answer dropped), and dies; the key."""
        key = effect_key(run_id, 0, EFFECT, 0)
        lease = await self.leases.acquire(run_id, worker, 400)
        env = {"run_id": run_id, "fence": lease.fence, "worker_id": worker}
        events: list[Event] = [
            RunStarted(**env, seq=1, agent="test", plan=[EFFECT]),
            StepStarted(**env, seq=2, step=0, step_name=EFFECT, attempt=1),
            intent(run_id, key, seq=3, fence=lease.fence, worker=worker),
        ]
        await self.log.publish(events)
        if perform:
            await self.client.set_faults(FaultRule(mode="drop-after-commit", key=key, times=1))
            async with HttpProvider(self.sandbox.url, name="sandbox") as provider:
                with pytest.raises(ProviderUnavailableError):
                    await provider.perform(REQUEST, key)
        await eventually(lambda: self._expired(run_id), f"lease of {run_id} to expire", 10)
        await eventually(lambda: self._projected(run_id, key), f"intent {key} in the views")
        return key

    async def _expired(self, run_id: str) -> bool:
        return await self.leases.current(run_id) is None

    async def _projected(self, run_id: str, key: str) -> bool:
        view = await self.views.load(run_id)
        return view is not None and key in view.effects

    async def view(self, run_id: str) -> RunView:
        """The run's view once the projector caught up with the log."""
        positions = await self.log.run_end_positions(run_id)
        await eventually(lambda: self.views.progress(positions), f"views of {run_id}")
        view = await self.views.load(run_id)
        assert view is not None
        return view

    async def resume(self, run_id: str) -> Any:
        """Resume the run in the worker SDK; the step's result (the effect's ref, replayed)."""

        async def body(step: Step) -> Any:
            done = await step.effect(EFFECT, REQUEST)
            return {"external_ref": done.external_ref, "replayed": done.replayed}

        async with HttpProvider(self.sandbox.url, name="sandbox") as provider:
            ledger = Ledger(
                log=self.log,
                leases=self.leases,
                providers={"sandbox": provider},
                views=self.views,
                worker_id="w-resumer",
            )
            async with ledger.run(RunSpec(run_id=run_id, agent="test", plan=[EFFECT])) as run:
                return await run.step(EFFECT, body)

    async def effects(self, key: str) -> list[SandboxEffect]:
        """What the sandbox performed under ``key``."""
        return [e for e in await self.client.effects() if e.idempotency_key == key]

    def settings(self, name: str = "rec-1", **extra: Any) -> ReconcilerSettings:
        """Reconciler settings on this stack."""
        return reconciler_settings(self.common, self.sandbox.url, name, **extra)


def intent(run_id: str, key: str, *, seq: int, fence: int, worker: str) -> EffectIntended:
    """The EffectIntended the SDK writes for REQUEST as effect 0 of step 0."""
    return EffectIntended(
        run_id=run_id,
        seq=seq,
        fence=fence,
        worker_id=worker,
        step=0,
        ordinal=0,
        effect=EFFECT,
        provider="sandbox",
        kind=REQUEST.kind,
        idempotency_key=key,
        identity_hash=REQUEST.identity_hash,
        payload_hash=REQUEST.payload_hash,
    )


class TestCommonSettings(ArgumentsOnly, CommonSettings):
    """CommonSettings from explicit values only."""

    __test__ = False


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def module_settings(stack: Any) -> AsyncIterator[CommonSettings]:
    """Topics and Redis keys of this test module (one projector serves all its tests)."""
    tag = f"r{uuid.uuid4().hex[:12]}"
    settings = TestCommonSettings(
        kafka_bootstrap=stack.kafka_bootstrap,
        redis_url=stack.redis_url,
        topic_prefix=f"{tag}.",
        key_prefix=tag,
    )
    specs = topic_specs(settings)
    await ensure_topics(settings, specs)
    yield settings
    await delete_topics(settings, [spec.name for spec in specs])
    client = Redis.from_url(stack.redis_url)
    try:
        keys = [key async for key in client.scan_iter(match=f"*{tag}*", count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(
    module_settings: CommonSettings, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Env]:
    """Sandbox subprocess, projector process, leases and a worker's event log, per module.

    Tests of one module share them: each uses its own run ids and filters what it reads by them.
    """
    db = tmp_path_factory.mktemp("sandbox") / "sandbox.sqlite3"
    async with (
        SandboxProcess(db) as sandbox,
        SandboxClient(sandbox.url) as client,
        projector(module_settings) as views,
        RedisLeaseStore.from_settings(module_settings) as leases,
        KafkaEventLog(module_settings, transactional_id="test-worker", guard=leases) as log,
    ):
        yield Env(module_settings, sandbox, client, views, leases, log)


async def topic_events(common: CommonSettings, role: str) -> list[Event]:
    """Every committed event of one topic, read to its current end."""
    found = []
    async with KafkaEventConsumer(
        common, [topic_names(common).for_role(role)], until_end=True
    ) as consumer:
        async for record in consumer:
            assert record.event is not None, record.error
            found.append(record.event)
    return found


async def requests_for(env: Env, run_id: str) -> int:
    """How many ResumeRequested for ``run_id`` are on the requests topic."""
    events = await topic_events(env.common, "requests")
    return sum(1 for e in events if isinstance(e, ResumeRequested) and e.run_id == run_id)


async def reconcile_once(env: Env, name: str = "rec-1") -> dict[str, int]:
    """One pass of a fresh reconciler instance; its report."""
    app: ReconcilerApp
    async with open_reconciler(env.settings(name)) as app:
        return (await app.reconciler.run_once()).to_dict()


async def test_commit_then_drop_is_landed_and_resume_sends_nothing(env: Env) -> None:
    """Performed, answer dropped, worker dead: LANDED with the sandbox id; resume sends nothing."""
    key = await env.dying_worker("run-landed", perform=True)
    [performed] = await env.effects(key)
    report = await reconcile_once(env)
    assert report["landed"] == 1
    view = await env.view("run-landed")
    assert view.effects[key].state == "landed"
    assert view.effects[key].external_ref == performed.id
    assert await requests_for(env, "run-landed") == 1
    result = await env.resume("run-landed")
    assert result == {"external_ref": performed.id, "replayed": True}
    assert len(await env.effects(key)) == 1


async def test_never_sent_is_not_landed_and_resume_sends_once(env: Env) -> None:
    """Intent written, call never made: NOT_LANDED, then the resumed run sends exactly once."""
    key = await env.dying_worker("run-missing", perform=False)
    report = await reconcile_once(env)
    assert report["not_landed"] == 1
    assert (await env.view("run-missing")).effects[key].state == "not_landed"
    assert await env.effects(key) == []
    result = await env.resume("run-missing")
    assert result["replayed"] is False
    [effect] = await env.effects(key)
    assert result["external_ref"] == effect.id


async def test_provider_down_pauses_alerts_once_and_recovers(env: Env) -> None:
    """Down: UNKNOWN, run paused, one alert over three polls; back: LANDED and the alert closed."""
    key = await env.dying_worker("run-down", perform=True)
    await env.client.set_faults(FaultRule(mode="down"))
    async with open_reconciler(env.settings()) as app:
        for _ in range(3):
            report = await app.reconciler.run_once()
            assert report.unknown + report.backed_off == 1
            await asyncio.sleep(0.02)  # past the provider's (tiny) backoff
        view = await env.view("run-down")
        assert view.status == "paused"
        assert view.pause is not None
        assert view.pause.reason == "effect_unknown"
        assert view.effects[key].state == "unknown"
        await env.client.clear_faults()
        report = await app.reconciler.run_once()
        assert report.landed == 1
    alerts = [
        e
        for e in await topic_events(env.common, "alerts")
        if isinstance(e, Alert) and e.run_id == "run-down"
    ]
    assert [(a.code, a.state) for a in alerts] == [
        ("effect.unknown", "open"),
        ("effect.unknown", "closed"),
    ]
    assert alerts[0].alert_id == alerts[1].alert_id
    assert alerts[1].count >= 3
    assert (await env.view("run-down")).effects[key].state == "landed"
    assert await requests_for(env, "run-down") == 1


async def test_a_live_worker_keeps_its_intent(env: Env) -> None:
    """An intent whose writer still holds the lease is not looked up."""
    lease = await env.leases.acquire("run-live", "w-live", 60_000)
    key = effect_key("run-live", 0, EFFECT, 0)
    env_ = {"run_id": "run-live", "fence": lease.fence, "worker_id": "w-live"}
    events: list[RunEvent] = [
        RunStarted(**env_, seq=1, agent="test", plan=[EFFECT]),
        StepStarted(**env_, seq=2, step=0, step_name=EFFECT, attempt=1),
        intent("run-live", key, seq=3, fence=lease.fence, worker="w-live"),
    ]
    await env.log.publish(events)
    await env.view("run-live")
    report = await reconcile_once(env)
    assert report["held"] >= 1
    assert key not in await env.client.lookups()


async def test_orphaned_run_is_requeued_with_an_alert(env: Env) -> None:
    """A running run with no lease and no open intent is re-queued once, with run.orphaned."""
    lease = await env.leases.acquire("run-orphan", "w-dead", 60_000)
    env_ = {"run_id": "run-orphan", "fence": lease.fence, "worker_id": "w-dead"}
    await env.log.publish([RunStarted(**env_, seq=1, agent="test", plan=[EFFECT])])
    await env.leases.release(lease)
    await env.view("run-orphan")
    async with open_reconciler(env.settings(reconciler_orphan_grace_ms=0)) as app:
        first = await app.reconciler.run_once()
        assert first.orphans >= 1
    assert await requests_for(env, "run-orphan") == 1
    alerts = [
        e
        for e in await topic_events(env.common, "alerts")
        if isinstance(e, Alert) and e.run_id == "run-orphan"
    ]
    assert [(a.code, a.state) for a in alerts] == [("run.orphaned", "open")]


async def test_failed_run_is_compensated_once_at_the_sandbox(env: Env) -> None:
    """A failed run's performed effect in a rejected step is undone once, under its own key."""
    run_id = "run-comp"
    key = effect_key(run_id, 0, EFFECT, 0)
    async with HttpProvider(env.sandbox.url, name="sandbox") as provider:
        performed = await provider.perform(REQUEST, key)
    lease = await env.leases.acquire(run_id, "w-1", 60_000)
    env_ = {"run_id": run_id, "fence": lease.fence, "worker_id": "w-1"}
    await env.log.publish(
        [
            RunStarted(**env_, seq=1, agent="test", plan=[EFFECT]),
            StepStarted(**env_, seq=2, step=0, step_name=EFFECT, attempt=1),
            intent(run_id, key, seq=3, fence=lease.fence, worker="w-1"),
            EffectRecorded(
                **env_, seq=4, step=0, effect=EFFECT, idempotency_key=key,
                outcome="succeeded", external_ref=performed.external_ref,
            ),
            StepRejected(**env_, seq=5, step=0, step_name=EFFECT, attempt=1, reason="bad"),
            RunFinished(**env_, seq=6, status="failed"),
        ]
    )  # fmt: skip
    await env.leases.release(lease)
    await env.view(run_id)
    for _ in range(2):
        report = await reconcile_once(env)
    assert report["compensated"] == 0
    undone = await env.effects(f"{key}:compensate")
    assert [(e.kind, e.compensates) for e in undone] == [
        ("payments.compensation", performed.external_ref)
    ]
    assert (await env.view(run_id)).effects[key].state == "compensated"
