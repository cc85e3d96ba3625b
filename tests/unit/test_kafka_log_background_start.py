"""A Kafka event log started in the background: every call of the port waits for the start
(the end offsets only after the producer's InitProducerId), and a failed start is the error
of every call, not a hang."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentledger.bus.kafka import KafkaEventLog
from agentledger.bus.port import Position
from agentledger.errors import ConfigurationError
from agentledger.settings import CommonSettings

SETTINGS = CommonSettings(kafka_bootstrap="127.0.0.1:1", topic_prefix="bg.")


class _Producer:
    """Stands for a started aiokafka producer (only stopped here)."""

    stopped = False

    async def stop(self) -> None:
        self.stopped = True


def _log_with(
    monkeypatch: pytest.MonkeyPatch, producer_started: asyncio.Event, said: list[str]
) -> KafkaEventLog:
    """A log whose producer starts when ``producer_started`` is set and whose reader says, in
    ``said``, when it was asked for end offsets."""
    log = KafkaEventLog(SETTINGS, transactional_id="bg-producer")

    async def open_producer(**_: Any) -> _Producer:
        await producer_started.wait()
        said.append("producer started")
        return _Producer()

    async def check_run_topics(_: object) -> None:
        said.append("run topics checked")

    async def end_positions(run_id: str, partitions: int) -> list[Position]:
        said.append("end offsets")
        return [Position("bg.steps", 0, 7)]

    monkeypatch.setattr(log, "_open_producer", open_producer)
    monkeypatch.setattr(log, "_check_run_topics", check_run_topics)
    monkeypatch.setattr(log._reader, "end_positions", end_positions)
    log._partitions = 4  # known already: nothing else makes the offsets wait for the producer
    return log


async def test_end_offsets_are_asked_only_after_the_producer_started(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """start_soon returns at once; the end offsets wait until InitProducerId is done."""
    producer_started = asyncio.Event()
    said: list[str] = []
    log = _log_with(monkeypatch, producer_started, said)
    log.start_soon()
    asking = asyncio.ensure_future(log.run_end_positions("run-1"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not asking.done()
    assert "end offsets" not in said
    producer_started.set()
    assert await asking == [Position("bg.steps", 0, 7)]
    assert said.index("producer started") < said.index("run topics checked")
    assert said.index("run topics checked") < said.index("end offsets")
    await log.stop()


async def test_a_failed_start_is_the_error_of_each_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The start's error (missing topics) is raised by every later call of the port."""
    log = KafkaEventLog(SETTINGS, transactional_id="bg-producer")

    async def open_producer(**_: Any) -> _Producer:
        return _Producer()

    async def check_run_topics(_: object) -> None:
        raise ConfigurationError("run topics missing: bg.steps")

    monkeypatch.setattr(log, "_open_producer", open_producer)
    monkeypatch.setattr(log, "_check_run_topics", check_run_topics)
    log.start_soon()
    with pytest.raises(ConfigurationError, match=r"bg\.steps"):
        await log.run_end_positions("run-1")
    with pytest.raises(ConfigurationError, match=r"bg\.steps"):
        await log.read_run("run-1")
    with pytest.raises(ConfigurationError, match=r"bg\.steps"):
        await log.publish([])
    await log.stop()


async def test_stop_gives_up_a_start_under_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopping a log whose producer has not started yet returns, with nothing left running."""
    producer_started = asyncio.Event()
    log = _log_with(monkeypatch, producer_started, [])
    log.start_soon()
    await asyncio.sleep(0)
    await asyncio.wait_for(log.stop(), 5.0)
    assert log._loop_task is None
    assert log._producer is None
