"""The projector runtime past the outage budget: it gives up once (error kept, service told to
stop), counted from the outage's first failure, never acknowledging the batch; other errors
keep being retried."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest

from agentledger.errors import PublishError, UnreachableError
from agentledger.projector.ports import Record
from agentledger.projector.runtime import ProjectorRuntime
from agentledger.projector.testing import projector_settings
from agentledger.settings import CommonSettings

BUDGET_S = 0.3


class FailingProjector:
    """Stands in for the Projector: every process() and tick() raises ``errors`` in turn, then
    the last one for ever."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0
        self.resets = 0

    def _fail(self) -> None:
        self.calls += 1
        raise self.errors.pop(0) if len(self.errors) > 1 else self.errors[0]

    async def process(self, _records: Sequence[Record]) -> None:
        self._fail()

    async def tick(self) -> None:
        self._fail()

    async def reset_delivery(self) -> None:
        self.resets += 1

    def assign(self, _tps: object) -> None:
        return None


def runtime_with(fake: FailingProjector) -> tuple[ProjectorRuntime, list[str]]:
    """A started-looking runtime over ``fake`` whose on_fatal notes each call."""
    common = CommonSettings.model_construct(
        kafka_bootstrap="127.0.0.1:1", redis_url="redis://127.0.0.1:1/0"
    )
    told: list[str] = []
    runtime = ProjectorRuntime(
        projector_settings(common, outage_budget_s=BUDGET_S), on_fatal=lambda: told.append("stop")
    )
    runtime._projector = fake  # type: ignore[assignment]  # the seam of this test
    runtime.ready.set()
    return runtime, told


def redis_down() -> UnreachableError:
    """A failure of a Redis of this test alone (the table of outages is per process)."""
    return UnreachableError("Redis", f"redis://test-{uuid.uuid4().hex[:8]}", "connection refused")


async def test_a_batch_past_the_budget_gives_up_once_and_is_never_acknowledged() -> None:
    """A batch failing on an unreachable Redis is retried until the outage has lasted the
    budget; then the runtime keeps the error, tells the service once, and process() never
    returns (the batch is left to the next run) until the stopping service cancels it."""
    fake = FailingProjector(redis_down())
    runtime, told = runtime_with(fake)
    task = asyncio.create_task(runtime.process([]))
    await asyncio.sleep(BUDGET_S + 1.0)
    assert not task.done()
    assert told == ["stop"]
    assert runtime.fatal is not None
    assert str(runtime.fatal).startswith("Redis at redis://test-")
    assert f"(AGENTLEDGER_OUTAGE_BUDGET_S={BUDGET_S:g})" in str(runtime.fatal)
    assert fake.calls >= 2
    calls = fake.calls
    await asyncio.sleep(0.3)
    assert fake.calls == calls
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await runtime.tick()
    assert fake.calls == calls


async def test_ticks_count_one_outage_from_its_first_failure() -> None:
    """Ticks failing on the same unreachable dependency count towards one outage: no single
    tick waits the budget, yet the runtime gives up once the first failure is older than it."""
    down = redis_down()
    fake = FailingProjector(down)
    runtime, told = runtime_with(fake)
    await runtime.tick()
    assert runtime.fatal is None
    await asyncio.sleep(BUDGET_S)
    await runtime.tick()
    assert runtime.fatal is not None
    assert runtime.fatal.what == "Redis"
    assert runtime.fatal.endpoint == down.endpoint
    assert told == ["stop"]


async def test_errors_that_are_not_outages_keep_being_retried() -> None:
    """A batch failing for another reason (here a failed publish) is retried past the budget,
    as before: no give-up, and it is applied once the error goes away."""
    fake = FailingProjector(PublishError("aborted"))
    runtime, told = runtime_with(fake)

    async def then_ok(_records: Sequence[Record]) -> None:
        fake.calls += 1
        if fake.calls < 5:  # four failures, then it applies
            raise PublishError("aborted")

    fake.process = then_ok  # type: ignore[method-assign]
    await asyncio.wait_for(runtime.process([]), 10)
    assert runtime.fatal is None
    assert told == []
    assert fake.calls == 5
