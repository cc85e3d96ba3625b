"""The SDK on the real local stack: Kafka transactions, Redis leases, cold resume."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from agentledger._core.loader import fold_log
from agentledger._core.ports import WorkerPorts
from agentledger.demo.agent import PLAN, refund_agent, spec_for
from agentledger.events import EffectReconciled, TopicNames
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.rebuild import replay_into_new_namespace, swap_in
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest
from agentledger.settings import CommonSettings
from agentledger.testing import CrashSwitch, SimulatedCrash
from agentledger.views.redis_store import RedisViewStore
from agentledger.worker import Ledger, RunSpec, Step, WorkerSettings

from ..unit.test_redaction import cores, secrets

pytestmark = pytest.mark.integration


def worker_settings(base: CommonSettings, producer: str) -> WorkerSettings:
    """Worker settings on the test's topics and keys, with a stable transactional id."""
    return WorkerSettings(
        **base.model_dump(),
        transactional_id=producer,
        lease_ttl_ms=5_000,
        resume_barrier_s=0.0,
    )


@pytest_asyncio.fixture(loop_scope="session")
async def producer_id() -> AsyncIterator[str]:
    """A transactional id unique to the test (shared by its 'processes')."""
    yield f"sdk-test-{uuid.uuid4().hex[:8]}"


async def wipe_keys(settings: CommonSettings) -> None:
    """Delete every Redis key of the test's namespace (FLUSHALL, scoped to this test)."""
    assert settings.redis_url is not None
    client = Redis.from_url(settings.redis_url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{settings.key_prefix}*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


async def raw_records(settings: CommonSettings) -> list[bytes]:
    """Every record value of every topic of the test, read back raw from Kafka."""
    topics = [
        f"{settings.topic_prefix}{s}"
        for s in ("runs.steps", "runs.effects", "runs.acceptance", "alerts")
    ]
    consumer = AIOKafkaConsumer(
        *topics,
        bootstrap_servers=settings.kafka_bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level="read_uncommitted",
    )
    await consumer.start()
    try:
        values: list[bytes] = []
        while True:
            batch = await consumer.getmany(timeout_ms=1000)
            if not batch:
                return values
            values += [r.value for records in batch.values() for r in records if r.value]
    finally:
        await consumer.stop()


async def test_demo_agent_on_kafka_commits_gapless_fenced_events(
    ledger_settings: CommonSettings, producer_id: str
) -> None:
    """A whole refund run on Kafka: every step checkpointed, seq 1..n, one fence."""
    settings = worker_settings(ledger_settings, producer_id)
    provider = MemoryProvider(name="sandbox")
    async with WorkerPorts(settings) as ports:
        ledger = Ledger.from_settings(
            settings, log=ports.log, leases=ports.leases, providers={"sandbox": provider}
        )
        async with ledger.run(spec_for("k-1", 11)) as run:
            result = await refund_agent(run, 11)
        view = await fold_log(ports.log, "k-1")
    assert view.status == "succeeded"
    assert view.cursor == len(PLAN)
    assert result["order_id"] == "ord-k-1"
    seqs = sorted(view.steps)  # every step is there
    assert seqs == list(range(len(PLAN)))
    assert view.applied_seq > len(PLAN)
    assert len(provider.effects) == len([e for e in view.effects.values()])


async def test_crash_after_provider_commit_then_cold_resume_on_kafka(
    ledger_settings: CommonSettings, producer_id: str
) -> None:
    """Killed after the provider committed; Redis wiped; a new producer resumes: one effect."""
    settings = worker_settings(ledger_settings, producer_id)
    provider = MemoryProvider(name="sandbox")
    spec = RunSpec(run_id="k-2", agent="t", plan=("pay",))
    request_identity = {"order": "k-2", "amount": 10}

    async def pay(step: Step) -> Any:
        done = await step.effect(
            "charge", EffectRequest(kind="payments", identity=request_identity)
        )
        return {"replayed": done.replayed}

    async def first_process() -> None:
        async with WorkerPorts(settings) as ports:
            ledger = Ledger.from_settings(
                settings, log=ports.log, leases=ports.leases, providers={"sandbox": provider}
            )
            ledger.services.kill = CrashSwitch("after_provider_commit")
            async with ledger.run(spec) as run:
                await run.step("pay", pay)

    with pytest.raises(SimulatedCrash):
        await first_process()
    await wipe_keys(settings)
    async with WorkerPorts(settings) as ports:
        ledger = Ledger.from_settings(
            settings, log=ports.log, leases=ports.leases, providers={"sandbox": provider}
        )
        async with ledger.run(spec) as run:
            assert run.resumed_from == "log"
            assert await run.step("pay", pay) == {"replayed": True}
        events = await ports.log.read_run("k-2")
    assert len(provider.effects) == 1
    assert [e.finding for e in events if isinstance(e, EffectReconciled)] == ["LANDED"]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].fence == 2


async def redis_bytes(settings: CommonSettings) -> list[bytes]:
    """Every key of the test's namespace with its serialized value."""
    assert settings.redis_url is not None
    client = Redis.from_url(settings.redis_url)
    try:
        return [
            k + (await client.dump(k) or b"")
            async for k in client.scan_iter(match=f"{settings.key_prefix}*")
        ]
    finally:
        await client.aclose()


async def project_into_redis(settings: CommonSettings) -> None:
    """Fold every run topic into a fresh Redis namespace, as ``views rebuild`` does."""
    assert settings.redis_url is not None
    assert settings.kafka_bootstrap is not None
    async with (
        RedisViewStore.from_url(settings.redis_url, key_prefix=settings.key_prefix) as store,
        KafkaLogReader(settings.kafka_bootstrap) as reader,
    ):
        replay = await replay_into_new_namespace(
            store,
            reader,
            TopicNames(settings.topic_prefix).run_topics,
            partitions=settings.run_partitions,
        )
        await swap_in(store, replay, grace_ms=0)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(secrets, min_size=3, max_size=3))
async def test_secrets_never_reach_kafka_or_redis(
    ledger_settings: CommonSettings, producer_id: str, generated: list[str]
) -> None:
    """Hypothesis-generated secrets in the input, an activity, an effect's free text, a step
    result and an error message are masked before encoding: no byte of them is in any topic,
    nor in Redis once the views are projected (the test's topics and keys accumulate over the
    examples, and every example checks all of them)."""
    worker = worker_settings(ledger_settings, producer_id)
    provider = MemoryProvider(name="sandbox")
    run_id = f"k-3-{uuid.uuid4().hex[:6]}"
    spec = RunSpec(run_id=run_id, agent="t", plan=("leak", "fail"), input={"c": generated[0]})

    async def leak(step: Step) -> Any:
        await step.activity("llm", lambda: _value({"answer": generated}))
        await step.effect(
            "mail",
            EffectRequest(
                kind="emails",
                identity={"to": "x@example.com"},
                free_text={"body": " ".join(generated)},
            ),
        )
        return {"url": f"postgres://app:{generated[1]}@db/x", "all": generated}

    async def fail(step: Step) -> Any:
        raise RuntimeError(f"tool failed with Authorization: Bearer {generated[2]}")

    async with WorkerPorts(worker) as ports:
        ledger = Ledger.from_settings(
            worker, log=ports.log, leases=ports.leases, providers={"sandbox": provider}
        )

        async def walk() -> None:
            async with ledger.run(spec) as run:
                await run.step("leak", leak)
                await run.step("fail", fail)

        with pytest.raises(RuntimeError):
            await walk()
    await project_into_redis(worker)
    in_kafka = await raw_records(worker)
    in_redis = await redis_bytes(worker)
    assert len(in_kafka) > 5
    assert any(b":run" in k for k in in_redis)  # the views are there
    for secret in generated:
        for core in cores(secret):
            assert not any(core.encode() in v for v in in_kafka), secret
            assert not any(core.encode() in v for v in in_redis), secret


async def _value(value: Any) -> Any:
    return value
