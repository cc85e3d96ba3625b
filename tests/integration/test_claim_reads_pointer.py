"""A resume's claim reads the views' pointer along, and its view read skips that round trip.

The view read then starts from the namespace the claim saw; the pointer it reads in the same
MULTI/EXEC says whether that namespace was still live, and when it was not, the namespace live
then is read. Each read is compared with a store that has seen nothing (the read as it was:
the pointer first, then the MULTI/EXEC).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from agentledger._core.ports import WorkerPorts
from agentledger._core.settings import WorkerSettings
from agentledger.events import EffectIntended, RunStarted, StepStarted
from agentledger.events.models import RunEvent
from agentledger.settings import CommonSettings
from agentledger.views import RunView, fold
from agentledger.views.redis_store import RedisViewStore
from agentledger.views.store import RunWrite, ViewAt

pytestmark = pytest.mark.integration


def events(run: str, step_name: str) -> list[RunEvent]:
    """A run started with one step under way and its effect intended."""
    env: dict[str, Any] = {"run_id": run, "fence": 1, "worker_id": "w"}
    return [
        RunStarted(**env, seq=1, occurred_at=1, agent="a", plan=[step_name]),
        StepStarted(**env, seq=2, occurred_at=2, step=0, step_name=step_name, attempt=1),
        EffectIntended(
            **env,
            seq=3,
            occurred_at=3,
            step=0,
            ordinal=0,
            effect="pay",
            provider="p",
            kind="payments",
            idempotency_key=f"{run}:{step_name}:k0",
            identity_hash="i",
            payload_hash="h",
        ),
    ]


async def put(store: RedisViewStore, namespace: str, run: str, step_name: str) -> None:
    """The run's view written in ``namespace`` as the projector writes it."""
    result = fold(RunView(run_id=run), events(run, step_name))
    write = RunWrite(
        run_id=run,
        expected=None,
        view=result.view,
        steps=result.touched_steps,
        effects=result.touched_effects,
        parked=result.parked,
        parked_changed=True,
    )
    outcome = await store.write_runs(namespace, [write])
    assert not outcome.conflicts


class PointerReads:
    """Counts the reads of the pointer made on their own (GET), not inside a MULTI/EXEC."""

    def __init__(self, store: RedisViewStore) -> None:
        self.count = 0
        client = store.client
        get = client.get
        key = store.pointer_key

        async def counted(name: Any, *args: Any, **kwargs: Any) -> Any:
            if name == key:
                self.count += 1
            return await get(name, *args, **kwargs)

        client.get = counted  # type: ignore[method-assign]


@pytest_asyncio.fixture(loop_scope="session")
async def ports(ledger_settings: CommonSettings) -> AsyncIterator[WorkerPorts]:
    """A worker's ports on the test's keys (Redis only: the log is never started)."""
    settings = WorkerSettings(**ledger_settings.model_dump(), transactional_id="claim-reads")
    ports = WorkerPorts(settings)
    try:
        yield ports
    finally:
        await ports.redis.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def unseeing(ledger_settings: CommonSettings) -> AsyncIterator[RedisViewStore]:
    """A store on the same keys that reads the pointer first, as every view read did."""
    async with RedisViewStore.from_url(
        ledger_settings.redis_url or "", key_prefix=ledger_settings.key_prefix
    ) as store:
        yield store


def same(a: ViewAt | None, b: ViewAt | None) -> None:
    assert a is not None
    assert b is not None
    assert a.view == b.view
    assert a.progress == b.progress
    assert a.parked == b.parked
    assert a.dropped_from == b.dropped_from


async def test_a_view_read_after_a_claim_reads_no_pointer_of_its_own(
    ports: WorkerPorts, unseeing: RedisViewStore
) -> None:
    """After a worker's claim, the run's view is read in one round trip (no GET of the
    pointer), and it is the view a read that takes the pointer first gives."""
    store = ports.store
    namespace = await unseeing.live_namespace(create=True)
    assert namespace is not None
    await put(unseeing, namespace, "r1", "fetch")
    reads = PointerReads(store)
    assert await ports.runs.claim("r1") == "unsure"  # nothing vouched for this index
    at = await store.load_at_every("r1")
    assert reads.count == 0
    same(at, await unseeing.load_at_every("r1"))
    assert at is not None
    assert at.view is not None
    assert at.view.plan == ["fetch"]


async def test_a_namespace_swapped_out_after_the_claim_saw_it_reads_the_live_one(
    ports: WorkerPorts, unseeing: RedisViewStore
) -> None:
    """A rebuild swapped in after the claim read the pointer: the view read gives the view of
    the namespace live now, as a read that takes the pointer first does, not None."""
    store = ports.store
    old = await unseeing.live_namespace(create=True)
    assert old is not None
    await put(unseeing, old, "r1", "old-step")
    await ports.runs.claim("r1")  # sees ``old``
    fresh = await unseeing.create_namespace()
    await put(unseeing, fresh, "r1", "new-step")
    assert await unseeing.swap(fresh) == old
    at = await store.load_at_every("r1")
    same(at, await unseeing.load_at_every("r1"))
    assert at is not None
    assert at.view is not None
    assert at.view.plan == ["new-step"]


async def test_a_pointer_gone_after_the_claim_saw_it_reads_as_no_views(
    ports: WorkerPorts, unseeing: RedisViewStore
) -> None:
    """The pointer deleted (the views wiped) after the claim saw it: the view read says there
    are no views, as a read that takes the pointer first does."""
    namespace = await unseeing.live_namespace(create=True)
    assert namespace is not None
    await put(unseeing, namespace, "r1", "fetch")
    await ports.runs.claim("r1")
    await unseeing.client.delete(unseeing.pointer_key)
    assert await unseeing.load_at_every("r1") is None
    assert await ports.store.load_at_every("r1") is None


async def test_claims_answer_the_same_with_the_pointer_read_along(ports: WorkerPorts) -> None:
    """Claims made together with the pointer read along still say new once, then known."""
    await ports.runs.vouch()
    answers = await asyncio.gather(*(ports.runs.claim(f"c{i}") for i in range(5)))
    assert answers == ["new"] * 5
    assert await ports.runs.claim("c0") == "known"
