"""The projector's bulk intake on the real stack: records beneath faust, offsets committed."""

from __future__ import annotations

import pytest

from agentledger.events.topics import topic_names
from agentledger.projector.kafka import KafkaLogReader
from agentledger.projector.testing import ProjectorProcess, isolated_projector, until
from tests.conftest import StackUnderTest
from tests.integration.test_projector_recovery import publish, runs_of

pytestmark = pytest.mark.integration


async def test_records_arrive_in_batches_and_the_group_offsets_follow_the_views(
    stack: StackUnderTest,
) -> None:
    """Published while the projector runs, 300 runs are applied in far fewer batches than
    records (whole fetches, not faust's one event at a time), and the group's committed offsets
    reach the log end once everything is applied (where a restart resumes delivery)."""
    async with isolated_projector(stack.kafka_bootstrap, stack.redis_url) as settings:
        assert settings.kafka_bootstrap is not None
        runs = runs_of("i", 300)
        total = sum(len(e) for e in runs.values())
        async with (
            ProjectorProcess(settings, name="intake") as proc,
            KafkaLogReader(settings.kafka_bootstrap) as reader,
        ):
            await proc.wait_ready()
            await publish(settings, runs)
            done = await until(proc.metrics, lambda m: int(m["events_applied"]) >= total, 120)
            assert int(done["events_applied"]) == total
            assert int(done["batches"]) < total // 2  # one event a batch: faust delivering
            tps = await reader.partitions(topic_names(settings).run_topics)
            ends = await reader.end_offsets(tps)

            async def committed() -> dict[tuple[str, int], int]:
                return await reader.committed_offsets(settings.projector_group, tps)

            assert await until(committed, lambda c: c == ends, 60) == ends
