"""A Kafka client's bounded start and stop keep a cancellation and leave nothing open."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

import pytest

from agentledger.bus import clients
from agentledger.bus.clients import start_client, stop_client
from agentledger.errors import UnreachableError


@dataclass
class CancelsCallerClient:
    """A client whose start or stop completes in the very step its caller is cancelled."""

    caller: asyncio.Task[None] | None = None
    cancel_on: str = "start"
    calls: list[str] = field(default_factory=list)

    async def start(self) -> None:
        """Start; cancel the caller first when asked to (the race a service hits on shutdown)."""
        self.calls.append("start")
        if self.cancel_on == "start" and self.caller is not None:
            self.caller.cancel()

    async def stop(self) -> None:
        """Stop; cancel the caller first when asked to."""
        self.calls.append("stop")
        if self.cancel_on == "stop" and self.caller is not None:
            self.caller.cancel()


@dataclass
class SlowStartClient:
    """A client whose start never finishes (aiokafka looking for a coordinator)."""

    calls: list[str] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        """Hang until cancelled."""
        self.calls.append("start")
        self.started.set()
        await asyncio.Event().wait()

    async def stop(self) -> None:
        """Record the stop."""
        self.calls.append("stop")


async def run_cancelled(client: CancelsCallerClient, call: str) -> asyncio.Task[None]:
    """Run start_client or stop_client on ``client`` in a task that gets cancelled mid-call."""

    async def body() -> None:
        if call == "start":
            await start_client(client, bootstrap="127.0.0.1:9", timeout_ms=5_000, role="consumer")
        else:
            await stop_client(client)
        await asyncio.sleep(0)  # a dropped cancellation would let the service carry on here

    task = asyncio.get_running_loop().create_task(body())
    client.caller = task
    await asyncio.wait([task])
    return task


async def test_a_cancel_arriving_as_the_start_completes_is_kept() -> None:
    """A service cancelled while its consumer finishes starting is cancelled (not left running)."""
    client = CancelsCallerClient(cancel_on="start")
    task = await run_cancelled(client, "start")
    assert task.cancelled()


async def test_a_cancel_arriving_as_the_stop_completes_is_kept() -> None:
    """A cancellation that lands while a client stops still cancels the caller."""
    client = CancelsCallerClient(cancel_on="stop")
    task = await run_cancelled(client, "stop")
    assert task.cancelled()


async def test_a_start_cancelled_half_way_stops_the_client() -> None:
    """Cancelling a start that has not finished stops the client, so no socket is left open."""
    client = SlowStartClient()
    task = asyncio.get_running_loop().create_task(
        start_client(client, bootstrap="127.0.0.1:9", timeout_ms=60_000, role="consumer")
    )
    await client.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.calls == ["start", "stop"]


@dataclass
class SwallowingClient:
    """A client whose start or stop swallows the first cancellation, then waits forever."""

    hang_in: str
    calls: list[str] = field(default_factory=list)

    async def _hang(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):  # "finished" on the cancellation
            await asyncio.Event().wait()
        await asyncio.Event().wait()

    async def start(self) -> None:
        """Start, hanging when asked to."""
        self.calls.append("start")
        if self.hang_in == "start":
            await self._hang()

    async def stop(self) -> None:
        """Stop, hanging when asked to."""
        self.calls.append("stop")
        if self.hang_in == "stop":
            await self._hang()


async def test_a_stop_that_swallows_its_deadline_is_abandoned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client's stop that ignores the cancellation sent at the deadline does not hold the
    caller (a test's teardown hung 300 s on CI this way): stop_client returns."""
    monkeypatch.setattr(clients, "STOP_TIMEOUT_S", 0.05)
    client = SwallowingClient(hang_in="stop")
    task = asyncio.get_running_loop().create_task(stop_client(client))
    done, _ = await asyncio.wait({task}, timeout=30)  # a bound on the test, not on the code
    assert task in done
    assert task.exception() is None
    assert client.calls == ["stop"]


async def test_a_start_that_swallows_its_deadline_fails_as_unreachable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A client's start that ignores the cancellation sent at the deadline still ends in the
    start's UnreachableError, and the client is stopped."""
    monkeypatch.setattr(clients, "STOP_TIMEOUT_S", 0.05)
    client = SwallowingClient(hang_in="start")
    task = asyncio.get_running_loop().create_task(
        start_client(client, bootstrap="127.0.0.1:9", timeout_ms=50, role="consumer")
    )
    done, _ = await asyncio.wait({task}, timeout=30)  # a bound on the test, not on the code
    assert task in done
    with pytest.raises(UnreachableError, match="did not start within 50 ms"):
        task.result()
    assert client.calls == ["start", "stop"]
