"""The reconciler on the real Kafka, Redis, projector and a sandbox provider subprocess.

Open intents are made the way a worker killed mid-effect leaves them: RunStarted, StepStarted and
EffectIntended written under a lease that then expires, with the effect performed at the sandbox
(commit-then-drop) or never sent. The "later resume" is the real worker SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from agentledger.bus.consumer import KafkaEventConsumer
from agentledger.bus.kafka import KafkaEventLog
from agentledger.errors import ProviderUnavailableError
from agentledger.events.models import (
    Alert,
    EffectIntended,
    Event,
    ResumeRequested,
    RunEvent,
    RunStarted,
    StepStarted,
)
from agentledger.events.topics import topic_names
from agentledger.leasing.redis_store import RedisLeaseStore
from agentledger.projector.runtime import ProjectorRuntime
from agentledger.projector.settings import ProjectorSettings
from agentledger.providers.faults import FaultRule
from agentledger.providers.http import HttpProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.providers.sandbox.client import SandboxClient
from agentledger.providers.sandbox.process import SandboxProcess
from agentledger.reconciler.app import ReconcilerApp, open_reconciler
from agentledger.reconciler.settings import ProviderPolicy, ReconcilerSettings
from agentledger.settings import CommonSettings
from agentledger.views.model import RunView
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Ledger, RunSpec, Step
from agentledger.worker.keys import effect_key

pytestmark = pytest.mark.integration

REQUEST = EffectRequest(
    kind="payments", identity={"amount": 1250, "currency": "EUR", "customer": "c-42"}
)
EFFECT = "charge"


def _init_only(
    cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource
) -> tuple[PydanticBaseSettingsSource, ...]:
    return (init_settings,)


class TestReconcilerSettings(ReconcilerSettings):
    """ReconcilerSettings from explicit values only: the environment cannot leak in."""

    __test__ = False

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Use the constructor's arguments only."""
        return _init_only(settings_cls, init_settings)


class TestProjectorSettings(ProjectorSettings):
    """ProjectorSettings from explicit values only."""

    __test__ = False

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Use the constructor's arguments only."""
        return _init_only(settings_cls, init_settings)


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
    """The real projector in-process, assigned every run partition, catching up on its own."""
    settings = TestProjectorSettings(**common.model_dump(), projector_web_enabled=False)
    runtime = ProjectorRuntime(settings)
    await runtime.start()
    runtime.assign(
        [(t, p) for t in topic_names(settings).run_topics for p in range(settings.run_partitions)]
    )

    async def ticking() -> None:
        while True:
            await runtime.tick()
            await asyncio.sleep(0.05)

    task = asyncio.get_running_loop().create_task(ticking())
    assert settings.redis_url is not None
    try:
        async with RedisViewStore.from_url(
            settings.redis_url, key_prefix=settings.key_prefix
        ) as views:
            yield views
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await runtime.stop()


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

    async def resume(self, run_id: str) -> tuple[Any, int]:
        """Resume the run in the worker SDK; its effect result and the sandbox's effect count."""

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
                result = await run.step(EFFECT, body)
        return result, len(await self.client.effects())

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


@pytest.fixture
async def env(ledger_settings: CommonSettings, tmp_path: Path) -> AsyncIterator[Env]:
    """Sandbox subprocess, in-process projector, leases and a worker's event log."""
    async with (
        SandboxProcess(tmp_path / "sandbox.sqlite3") as sandbox,
        SandboxClient(sandbox.url) as client,
        projector(ledger_settings) as views,
        RedisLeaseStore.from_settings(ledger_settings) as leases,
        KafkaEventLog(ledger_settings, transactional_id="test-worker", guard=leases) as log,
    ):
        yield Env(ledger_settings, sandbox, client, views, leases, log)


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


async def reconcile_once(env: Env, name: str = "rec-1") -> dict[str, int]:
    """One pass of a fresh reconciler instance; its report."""
    app: ReconcilerApp
    async with open_reconciler(env.settings(name)) as app:
        return (await app.reconciler.run_once()).to_dict()


async def test_commit_then_drop_is_landed_and_resume_sends_nothing(env: Env) -> None:
    """Performed, answer dropped, worker dead: LANDED with the sandbox id; resume sends nothing."""
    key = await env.dying_worker("run-landed", perform=True)
    [performed] = await env.client.effects()
    report = await reconcile_once(env)
    assert report["landed"] == 1
    view = await env.view("run-landed")
    assert view.effects[key].state == "landed"
    assert view.effects[key].external_ref == performed.id
    requests = await topic_events(env.common, "requests")
    assert [(e.run_id, type(e)) for e in requests] == [("run-landed", ResumeRequested)]
    result, performed_count = await env.resume("run-landed")
    assert result == {"external_ref": performed.id, "replayed": True}
    assert performed_count == 1


async def test_never_sent_is_not_landed_and_resume_sends_once(env: Env) -> None:
    """Intent written, call never made: NOT_LANDED, then the resumed run sends exactly once."""
    key = await env.dying_worker("run-missing", perform=False)
    report = await reconcile_once(env)
    assert report["not_landed"] == 1
    assert (await env.view("run-missing")).effects[key].state == "not_landed"
    assert await env.client.effects() == []
    result, performed_count = await env.resume("run-missing")
    assert result["replayed"] is False
    assert performed_count == 1
    [effect] = await env.client.effects()
    assert effect.idempotency_key == key


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
    alerts = [e for e in await topic_events(env.common, "alerts") if isinstance(e, Alert)]
    assert [(a.code, a.state) for a in alerts] == [
        ("effect.unknown", "open"),
        ("effect.unknown", "closed"),
    ]
    assert alerts[0].alert_id == alerts[1].alert_id
    assert alerts[1].count >= 3
    assert (await env.view("run-down")).effects[key].state == "landed"
    requests = await topic_events(env.common, "requests")
    assert [e.run_id for e in requests if isinstance(e, ResumeRequested)] == ["run-down"]


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
    assert report["held"] == 1
    assert report["looked_up"] == 0
    assert await env.client.lookups() == {}
