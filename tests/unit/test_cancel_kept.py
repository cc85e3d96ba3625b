"""Bounded waits keep a cancellation that lands as they complete, and a stop never hangs."""

from __future__ import annotations

import ast
import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import agentledger
from agentledger import tasks
from agentledger.bus.publisher import KafkaPublisher
from agentledger.bus.reading import RunReader
from agentledger.bus.rounds import Rounds
from agentledger.demo.taskdump import await_chain
from agentledger.events.codec import EventCodec
from agentledger.leases import Lease
from agentledger.leasing.keeper import LeaseKeeper
from agentledger.leasing.memory import MemoryLeaseStore
from agentledger.settings import CommonSettings
from agentledger.tasks import stop_task, within
from tests.sources import parse
from tests.unit.event_samples import samples

SERVICES = Path(agentledger.__file__).parent


async def cancelled_as_it_completes(body: Callable[[asyncio.Task[None]], Awaitable[Any]]) -> bool:
    """Run ``body`` in a task that the awaited thing cancels in the very step it completes;
    whether that task ended cancelled (True) or ran on with the result (False)."""
    holder: list[asyncio.Task[None]] = []

    async def main() -> None:
        await asyncio.sleep(0)  # holder is filled before the body starts
        await body(holder[0])
        await asyncio.sleep(0)  # a dropped cancellation lets the caller carry on past here

    task = asyncio.get_running_loop().create_task(main())
    holder.append(task)
    await asyncio.wait([task])
    return task.cancelled()


async def finish_and_cancel(caller: asyncio.Task[None]) -> str:
    """An inner awaitable that cancels its caller and completes at once (the shutdown race)."""
    caller.cancel()
    return "done"


async def test_within_keeps_a_cancel_arriving_as_the_inner_completes() -> None:
    """A caller cancelled while the awaited thing completes ends cancelled (3.11's wait_for
    hands it the result and lets it run on)."""
    assert await cancelled_as_it_completes(lambda caller: within(finish_and_cancel(caller), 5))


async def test_within_still_times_out() -> None:
    """An awaitable slower than the limit raises TimeoutError."""
    with pytest.raises(TimeoutError):
        await within(asyncio.Event().wait(), 0.01)


async def test_no_service_module_uses_wait_for() -> None:
    """No module of the package calls asyncio.wait_for (the pitfall is kept out for good)."""
    found = []
    for path in SERVICES.rglob("*.py"):
        for node in ast.walk(parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "wait_for"
                and isinstance(node.value, ast.Name)
                and node.value.id == "asyncio"
            ):
                found.append(f"{path.relative_to(SERVICES)}:{node.lineno}")
    assert found == []


class _Producer:
    """A producer whose acks arrive in the same step the publishing caller is cancelled."""

    def __init__(self, caller: asyncio.Task[None]) -> None:
        self.caller = caller

    async def send(self, topic: str, *, value: bytes, key: bytes | None) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        acked: asyncio.Future[None] = loop.create_future()

        def ack() -> None:
            acked.set_result(None)
            self.caller.cancel()

        loop.call_soon(ack)
        return acked


async def test_a_publisher_cancelled_as_its_acks_arrive_is_cancelled() -> None:
    """A publish whose caller is cancelled while the acks arrive cancels the caller."""
    publisher = KafkaPublisher(CommonSettings(kafka_bootstrap="127.0.0.1:1"))

    async def body(caller: asyncio.Task[None]) -> None:
        publisher._producer = _Producer(caller)  # type: ignore[assignment]
        await publisher.publish(samples()[:1])  # one ack: one cancel

    assert await cancelled_as_it_completes(body)


async def test_a_reader_cancelled_as_the_topic_metadata_arrives_is_cancelled() -> None:
    """A run reader whose connect is cancelled while the run topics' metadata arrives ends
    cancelled instead of handing back a consumer nobody will stop."""
    reader = RunReader(
        "127.0.0.1:1", ("t.steps",), EventCodec(), connect_timeout_ms=1000, read_timeout_ms=1000
    )

    class _Client:
        def __init__(self, caller: asyncio.Task[None]) -> None:
            self.caller = caller

        async def set_topics(self, topics: list[str]) -> None:
            self.caller.cancel()

    class _Consumer:
        def __init__(self, caller: asyncio.Task[None]) -> None:
            self._client = _Client(caller)

        async def stop(self) -> None:
            return None

    async def body(caller: asyncio.Task[None]) -> None:
        await reader._learn_run_topics(_Consumer(caller))  # type: ignore[arg-type]

    assert await cancelled_as_it_completes(body)


async def hang_through_cancels() -> None:
    """Ignore every cancellation and wait forever (a close that never returns)."""
    while True:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            continue


async def test_stop_task_abandons_a_task_that_swallows_its_cancel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A background task that swallows its cancellation no longer holds its stopper forever."""
    monkeypatch.setattr(tasks, "STOP_TIMEOUT_S", 0.05)
    task = asyncio.get_running_loop().create_task(hang_through_cancels())
    await asyncio.sleep(0)
    async with asyncio.timeout(30):
        await stop_task(task)
    assert not task.done()
    task.get_coro().close()  # type: ignore[union-attr]


async def test_stop_task_keeps_the_stoppers_own_cancel() -> None:
    """A stopper cancelled while it waits for the task to end is cancelled itself."""
    started = asyncio.Event()

    async def slow_to_end() -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0.2)

    inner = asyncio.get_running_loop().create_task(slow_to_end())
    await started.wait()
    stopper = asyncio.get_running_loop().create_task(stop_task(inner))
    await asyncio.sleep(0.01)
    stopper.cancel()
    await asyncio.wait([stopper])
    assert stopper.cancelled()
    await asyncio.wait([inner])


class _HangingStore(MemoryLeaseStore):
    """A lease store whose renewal never returns, not even when cancelled."""

    def __init__(self) -> None:
        super().__init__()
        self.renewing = asyncio.Event()

    async def renew(self, lease: Lease, ttl_ms: int) -> Lease:
        self.renewing.set()
        await hang_through_cancels()
        return lease


async def test_a_lease_keeper_stops_even_when_its_renewal_hangs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run's close returns although the lease renewal in flight ignores its cancellation."""
    monkeypatch.setattr(tasks, "STOP_TIMEOUT_S", 0.05)
    store = _HangingStore()
    lease = await store.acquire("run-1", "w-1", 3_000)
    keeper = LeaseKeeper(store, lease, 3_000, interval_ms=1)
    async with asyncio.timeout(30):
        async with keeper:
            await store.renewing.wait()
    assert store.renewing.is_set()
    for task in asyncio.all_tasks():
        if task.get_name().startswith("lease-keeper:"):
            task.get_coro().close()  # type: ignore[union-attr]


async def test_rounds_stop_even_when_a_lookup_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopping a reader's rounds returns although the lookup in flight ignores cancellation."""
    monkeypatch.setattr(tasks, "STOP_TIMEOUT_S", 0.05)
    looking = asyncio.Event()

    async def lookup(keys: list[str]) -> dict[str, int]:
        looking.set()
        await hang_through_cancels()
        return {}

    rounds: Rounds[str, int] = Rounds(lookup, name="hanging-rounds")
    asking = asyncio.get_running_loop().create_task(rounds.ask(["a"]))
    await looking.wait()
    async with asyncio.timeout(30):
        await rounds.stop()
    await asyncio.wait([asking])
    assert asking.cancelled()
    for task in asyncio.all_tasks():
        if task.get_name() == "hanging-rounds":
            task.get_coro().close()  # type: ignore[union-attr]


async def test_a_task_dump_names_the_frame_a_task_waits_in() -> None:
    """The hung-worker dump shows each frame of a task's await chain down to what it awaits."""
    event = asyncio.Event()

    async def inner() -> None:
        await event.wait()

    async def outer() -> None:
        await inner()

    task = asyncio.get_running_loop().create_task(outer())
    await asyncio.sleep(0)
    chain = await_chain(task.get_coro())
    names = [line.rsplit(" ", 1)[-1] for line in chain[:3]]
    assert names == ["outer", "inner", "wait"]
    assert chain[-1].startswith("awaiting ")
    event.set()
    await task


async def swallows_cancels(entered: asyncio.Event) -> str:
    """A call that turns the first cancellation into a normal step and then waits forever (as
    aiokafka's consumer close does when its coordinator task ends on the cancellation)."""
    entered.set()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.Event().wait()
    await asyncio.Event().wait()
    return "never"


async def test_run_bounded_returns_at_the_deadline_when_the_call_swallows_the_cancel() -> None:
    """A call that ignores the cancellation sent at its deadline cannot hold the caller: the
    caller gets TimeoutError, where ``asyncio.timeout`` alone would wait forever."""
    entered = asyncio.Event()
    caller = asyncio.get_running_loop().create_task(
        tasks.run_bounded(swallows_cancels(entered), 0.05, name="swallower", grace_s=0.05)
    )
    done, _ = await asyncio.wait({caller}, timeout=30)  # a bound on the test, not on the code
    assert caller in done
    assert entered.is_set()
    with pytest.raises(TimeoutError, match=r"swallower did not end within 0\.05 s"):
        caller.result()


async def test_run_bounded_gives_the_result_or_the_error_of_the_call() -> None:
    """Within the deadline, the call's own outcome reaches the caller."""

    async def fails() -> None:
        raise ValueError("its own error")

    assert await tasks.run_bounded(asyncio.sleep(0, "result"), 5, name="sleeper") == "result"
    with pytest.raises(ValueError, match="its own error"):
        await tasks.run_bounded(fails(), 5, name="failer")


async def test_run_bounded_keeps_the_callers_cancellation_and_cancels_the_call() -> None:
    """Cancelling the caller cancels the call and the caller ends cancelled."""
    entered = asyncio.Event()
    inner: list[asyncio.Task[Any]] = []

    async def parked() -> None:
        inner.append(asyncio.current_task())  # type: ignore[arg-type]
        entered.set()
        await asyncio.Event().wait()

    caller = asyncio.get_running_loop().create_task(tasks.run_bounded(parked(), 60, name="parked"))
    await entered.wait()
    caller.cancel()
    await asyncio.wait({caller})
    assert caller.cancelled()
    assert inner[0].cancelled()
