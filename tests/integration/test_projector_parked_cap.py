"""The parked cap on the real stack: a run with more events ahead of a gap than the cap allows."""

from __future__ import annotations

import pytest

from agentledger.bus.kafka import KafkaEventLog
from agentledger.projector.testing import (
    ProjectorProcess,
    expected_view,
    isolated_projector,
    sample_run,
    until,
)
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import StoredRun
from tests.conftest import StackUnderTest
from tests.integration.test_projector_recovery import cli

pytestmark = pytest.mark.integration

CAP = 5


async def test_a_run_parking_more_than_the_cap_ends_equal_to_a_rebuild(
    stack: StackUnderTest,
) -> None:
    """A run whose first event is written after its 37 others parks only the cap's lowest seqs
    in Redis and marks the rest dropped; once the first event lands the projector re-reads the
    run from Kafka, and the live views equal a rebuild from the log (`views verify`)."""
    async with isolated_projector(
        stack.kafka_bootstrap, stack.redis_url, projector_parked_max=CAP
    ) as settings:
        assert settings.redis_url is not None
        events = sample_run("cap-run", steps=6)
        async with (
            RedisViewStore.from_url(
                settings.redis_url, key_prefix=settings.key_prefix, retention_ms=settings.retention
            ) as store,
            KafkaEventLog(settings, transactional_id=f"{settings.key_prefix}-tx") as log,
            ProjectorProcess(settings) as proc,
        ):
            await proc.wait_ready()

            async def stored() -> StoredRun | None:
                namespace = await store.live_namespace()
                if namespace is None:
                    return None
                return (await store.load_runs(namespace, ["cap-run"])).get("cap-run")

            def parked(run: StoredRun | None) -> tuple[list[int], int] | None:
                return (
                    None if run is None else (sorted(e.seq for e in run.parked), run.dropped_from)
                )

            for i in range(1, len(events), 4):
                await log.publish(events[i : i + 4])
            waiting = await until(stored, lambda r: parked(r) == ([2, 3, 4, 5, 6], 7), 60)
            assert parked(waiting) == ([2, 3, 4, 5, 6], 7)
            namespace = await store.live_namespace()
            assert namespace is not None
            parked_key = store.keys.space(namespace).run("cap-run", "parked")
            assert await store.client.hlen(parked_key) == CAP
            await log.publish(events[:1])
            view = await until(
                lambda: store.load("cap-run"), lambda v: v == expected_view(events), 60
            )
            assert view == expected_view(events)
            assert parked(await stored()) == ([], 0)
            assert await store.overdue_parked(namespace, 2**62) == []
            metrics = await proc.metrics()
            assert metrics["parked_overflow_rereads"] >= 1
            code, out = await cli(settings, "views", "verify")
            assert code == 0, out
            assert "0 difference(s)" in out
