"""The event log writes zstd record batches by default, and reads batches of any codec: a run
written gzip-compressed (session 7's default) reads back under the zstd default."""

from __future__ import annotations

import pytest
from bench.bytes import topic_breakdown

from agentledger.bus.kafka import KafkaEventLog
from agentledger.events import StepCheckpointed, StepStarted
from agentledger.events.schemas import default_schema_set
from agentledger.events.topics import topic_names
from agentledger.settings import CommonSettings
from tests.conftest import StackUnderTest

pytestmark = pytest.mark.integration


def step_events(run: str, first_seq: int, fence: int = 1) -> list[StepStarted | StepCheckpointed]:
    """A step's StepStarted and its checkpoint with a 1 KB hex result."""
    common = {"run_id": run, "fence": fence, "worker_id": "w", "step": 0, "step_name": "s"}
    return [
        StepStarted(seq=first_seq, attempt=1, **common),
        StepCheckpointed(
            seq=first_seq + 1,
            attempt=1,
            result_json='{"content":"' + "".join(f"{i:04x}" for i in range(256)) + '"}',
            **common,
        ),
    ]


def codecs_of(stack: StackUnderTest, settings: CommonSettings) -> dict[str, int]:
    """How many data batches of each codec the run-steps topic's segments hold."""
    data = stack.require_local().paths.kafka_data
    names = {fp: name for fp, (name, _) in default_schema_set().writers.items()}
    return dict(topic_breakdown(data, topic_names(settings).steps, names).codecs)


async def test_batches_are_zstd_and_gzip_ones_still_read(
    stack: StackUnderTest, ledger_settings: CommonSettings
) -> None:
    """A run's first step written with gzip and its second with the default settings lie in
    the log as one gzip and one zstd batch, and the run reads back whole, in order."""
    gzip_settings = ledger_settings.model_copy(update={"kafka_compression": "gzip"})
    first, second = step_events("r", 1), step_events("r", 3)
    async with KafkaEventLog(gzip_settings, transactional_id="old") as old:
        await old.publish(first)
    async with KafkaEventLog(ledger_settings, transactional_id="new") as new:
        assert ledger_settings.kafka_compression == "zstd"
        await new.publish(second)
        assert await new.read_run("r") == [*first, *second]
    assert codecs_of(stack, ledger_settings) == {"gzip": 1, "zstd": 1}
