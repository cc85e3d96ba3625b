"""A Kafka client's bounded start and stop keep a cancellation and leave nothing open."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from agentledger.bus.clients import start_client, stop_client


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
