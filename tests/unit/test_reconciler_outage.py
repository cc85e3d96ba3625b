"""The reconciler service past the outage budget, on the in-memory ports.

A pass failing because a dependency is unreachable is retried at the next poll until that
outage, counted from its first failure, has lasted ``AGENTLEDGER_OUTAGE_BUDGET_S``; then
``Reconciler.run`` raises the UnreachableError naming the dependency and the wait. A shorter
outage is ridden out, and other failures never stop the service.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from agentledger import outage
from agentledger.errors import ConfigurationError, UnreachableError
from agentledger.views.store import OpenIntent
from tests.unit.test_reconciler_service import REQUEST, FoldingViews, World

POLL_S = 0.02


class FailingViews(FoldingViews):
    """Views whose open-intent listing fails with ``error`` for the first ``times`` calls."""

    def __init__(self, world: World, error: Exception, times: int) -> None:
        super().__init__(world.log)
        self.error = error
        self.times = times
        self.calls = 0
        self.wanted = 10**9
        self.enough = asyncio.Event()

    async def open_intents(
        self, older_than: int | None = None, limit: int = 1000
    ) -> list[OpenIntent]:
        """Fail while failures remain, then list as the fold does."""
        self.calls += 1
        if self.calls >= self.wanted:
            self.enough.set()
        if self.calls <= self.times:
            raise self.error
        return await super().open_intents(older_than, limit)


def redis_down() -> UnreachableError:
    """A Redis call failing at once (no waiter in between), at an endpoint of this test."""
    return UnreachableError("Redis", f"redis://test-{uuid.uuid4().hex[:8]}:6379/0", "refused")


async def run_until(views: FailingViews, world: World, passes: int, budget_s: float) -> None:
    """Run the service until it made ``passes`` calls, then stop it."""
    reconciler = world.reconciler(
        views=views, reconciler_poll_interval_s=POLL_S, outage_budget_s=budget_s
    )
    views.wanted = passes
    stop = asyncio.Event()
    task = asyncio.create_task(reconciler.run(stop))
    enough = asyncio.create_task(views.enough.wait())
    await asyncio.wait([task, enough], return_when=asyncio.FIRST_COMPLETED)
    enough.cancel()
    stop.set()
    await asyncio.wait_for(task, 10)


async def test_an_outage_past_the_budget_stops_the_service_naming_redis_and_the_wait() -> None:
    """Passes failing on an unreachable Redis for longer than the budget make run() raise the
    UnreachableError naming Redis, the wait and the budget."""
    world = World()
    error = redis_down()
    views = FailingViews(world, error, times=10**9)
    with pytest.raises(UnreachableError) as raised:
        await run_until(views, world, passes=10**9, budget_s=0.2)
    message = str(raised.value)
    assert message.startswith(f"Redis at {error.endpoint} is unreachable: gave up after waiting")
    assert "(AGENTLEDGER_OUTAGE_BUDGET_S=0.2)" in message
    assert raised.value.waited_s is not None
    assert raised.value.waited_s >= 0.2
    assert views.calls > 1  # the first failures were retried, not fatal


async def test_a_zero_budget_stops_the_service_at_the_first_unreachable_pass() -> None:
    """With a budget of 0 the first pass failing on an unreachable Redis stops the service."""
    world = World()
    views = FailingViews(world, redis_down(), times=10**9)
    with pytest.raises(UnreachableError, match="gave up after waiting"):
        await run_until(views, world, passes=10**9, budget_s=0)
    assert views.calls == 1


async def test_an_outage_within_the_budget_is_ridden_out_and_the_runs_reconciled() -> None:
    """A few failed passes within the budget are retried; once Redis answers, the next pass
    resolves the open intent and the outage is over."""
    world = World()
    await world.start_run("r1", "k1")
    await world.provider.perform(REQUEST, "k1")
    error = redis_down()
    views = FailingViews(world, error, times=3)
    await run_until(views, world, passes=6, budget_s=60)
    assert (await world.view("r1")).effects["k1"].state == "landed"
    assert outage.outage_of("Redis", error.endpoint).down_since is None


async def test_other_failures_never_stop_the_service() -> None:
    """A pass failing for another reason is logged and retried at every poll, for ever."""
    world = World()
    views = FailingViews(world, ConfigurationError("not an outage"), times=10**9)
    await run_until(views, world, passes=20, budget_s=0)
    assert views.calls >= 20
