"""Events held in memory for a gap to fill, on the real stack: a SIGKILL loses none of them."""

from __future__ import annotations

import uuid

import pytest

from agentledger.bus.kafka import KafkaEventLog
from agentledger.events import RunEvent
from agentledger.projector.settings import ProjectorSettings
from agentledger.projector.testing import ProjectorProcess, isolated_projector, until
from agentledger.views.redis_store import RedisViewStore
from tests.conftest import StackUnderTest
from tests.integration.test_projector_recovery import runs_of, wrong_views

pytestmark = pytest.mark.integration


async def publish_each(settings: ProjectorSettings, batches: list[list[RunEvent]]) -> None:
    """Publish each list of events in its own transaction, in order."""
    async with KafkaEventLog(settings, transactional_id=f"hold-{uuid.uuid4().hex[:6]}") as log:
        for events in batches:
            await log.publish(events)


async def test_sigkill_while_events_are_held_then_restart_applies_every_event_once(
    stack: StackUnderTest,
) -> None:
    """A projector SIGKILLed while it holds runs' events in memory (their first event is not
    published yet) is replaced by one that applies them: every view equals the fold of its
    events (costs counted once), nothing parked."""
    async with isolated_projector(
        stack.kafka_bootstrap, stack.redis_url, projector_hold_ms=10_000
    ) as settings:
        runs = runs_of("h", 40)
        await publish_each(settings, [events[1:] for events in runs.values()])
        waiting = sum(len(events) - 1 for events in runs.values())
        assert settings.redis_url is not None
        async with RedisViewStore.from_url(
            settings.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
        ) as store:
            first = ProjectorProcess(settings, name="holding")
            await first.start()
            await first.wait_ready()
            seen = await until(
                first.metrics, lambda m: int(m["events_held"]) >= waiting, timeout_s=60
            )
            assert seen["events_parked"] == 0
            assert seen["events_applied"] == 0
            namespace = await store.live_namespace()
            assert namespace is not None
            assert await store.load_runs(namespace, sorted(runs)) == {}  # nothing written
            first.kill()
            await first.stop()
            await publish_each(settings, [[events[0] for events in runs.values()]])
            async with ProjectorProcess(settings, name="successor") as second:
                await second.wait_ready()
                wrong = await until(lambda: wrong_views(store, runs), lambda w: not w, 120)
                assert wrong == []
                assert await store.overdue_parked(namespace, 2**62) == []
