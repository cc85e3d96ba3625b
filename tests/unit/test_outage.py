"""The outage waiter: retries with backoff within the budget, one log line per outage, then a
typed error naming the dependency and the wait; the gauge and health read the same table."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from structlog.testing import capture_logs

from agentledger.errors import ConfigurationError, UnreachableError
from agentledger.outage import (
    ConnectionNoiseFilter,
    OutageCollector,
    backoff,
    outage_of,
    problems,
    ride_out,
    waiting,
)
from agentledger.settings import CommonSettings


def endpoint() -> str:
    """An endpoint of this test alone (the table of outages is per process)."""
    return f"127.0.0.1:{uuid.uuid4().int % 60000}-{uuid.uuid4().hex[:6]}"


class Flaky:
    """A call that fails ``failures`` times as unreachable, then answers."""

    def __init__(self, failures: int, where: str) -> None:
        self.left = failures
        self.calls = 0
        self.where = where

    async def __call__(self) -> str:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            raise UnreachableError("Kafka", self.where, "connection refused")
        return "answer"


async def test_a_short_outage_is_waited_out_and_logged_once() -> None:
    """Three failures within the budget: the call answers, with one line when the outage
    began and one when it ended, not one per failed try."""
    where = endpoint()
    flaky = Flaky(3, where)
    with capture_logs() as logs:
        result = await ride_out(flaky, dependency="Kafka", endpoint=where, budget_s=30)
    assert result == "answer"
    assert flaky.calls == 4
    events = [e["event"] for e in logs]
    assert events == ["dependency_unreachable_waiting", "dependency_back"]
    assert outage_of("Kafka", where).down_since is None


async def test_concurrent_callers_share_one_outage_line() -> None:
    """Many callers waiting for the same dependency log the outage once between them."""
    where = endpoint()
    with capture_logs() as logs:
        await asyncio.gather(
            *(
                ride_out(Flaky(2, where), dependency="Kafka", endpoint=where, budget_s=30)
                for _ in range(10)
            )
        )
    assert [e["event"] for e in logs].count("dependency_unreachable_waiting") == 1


async def test_past_the_budget_names_the_dependency_and_the_wait() -> None:
    """A dependency that never comes back gives UnreachableError with the wait and the setting."""
    where = endpoint()
    with pytest.raises(UnreachableError) as err:
        await ride_out(Flaky(10**6, where), dependency="Kafka", endpoint=where, budget_s=0.3)
    message = str(err.value)
    assert message.startswith(f"Kafka at {where} is unreachable: gave up after waiting ")
    assert "AGENTLEDGER_OUTAGE_BUDGET_S=0.3" in message
    assert err.value.waited_s is not None
    assert err.value.waited_s >= 0.3
    assert isinstance(err.value.__cause__, UnreachableError)


async def test_a_zero_budget_raises_the_first_failure_as_it_is() -> None:
    """Budget 0 keeps the old behaviour: the first failure is raised unchanged, no waiting."""
    where = endpoint()
    flaky = Flaky(1, where)
    with pytest.raises(UnreachableError) as err:
        await ride_out(flaky, dependency="Kafka", endpoint=where, budget_s=0)
    assert flaky.calls == 1
    assert err.value.waited_s is None


async def test_other_errors_are_not_retried() -> None:
    """A configuration mistake is not an outage: it is raised at once."""
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        raise ConfigurationError("wrong password")

    with pytest.raises(ConfigurationError):
        await ride_out(refused, dependency="Redis", endpoint=endpoint(), budget_s=30)
    assert calls == 1


def test_backoff_doubles_up_to_two_seconds() -> None:
    """The pause grows from 50 ms and is capped at 2 s."""
    assert [backoff(n) for n in (1, 2, 3)] == [0.05, 0.1, 0.2]
    assert backoff(100) == 2.0


async def test_gauge_and_health_show_an_outage_while_it_lasts() -> None:
    """While a dependency is down the gauge reports seconds waiting and health names it."""
    where = endpoint()
    outage = outage_of("Redis", where)
    outage.failed(UnreachableError("Redis", where, "refused"), budget_s=30)
    registry = CollectorRegistry()
    registry.register(OutageCollector("worker"))
    try:
        assert waiting()["Redis"] >= 0
        assert any(where in line for line in problems())
        text = generate_latest(registry).decode()
        assert 'agentledger_dependency_waiting_seconds{dependency="redis",service="worker"}' in text
    finally:
        outage.recovered()
    assert not any(where in line for line in problems())


def test_aiokafka_reconnect_noise_is_dropped_other_records_kept() -> None:
    """aiokafka's per-attempt connection failures are filtered; its other records are not."""
    noise = ConnectionNoiseFilter()

    def record(name: str, msg: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, None, None)

    assert not noise.filter(record("aiokafka", "Unable connect to node with id %s: %s"))
    assert not noise.filter(record("aiokafka.cluster", "Unable to update metadata from %s"))
    assert noise.filter(record("aiokafka.producer.sender", "Unexpected error in sender routine"))
    assert noise.filter(record("agentledger", "Unable connect to something of ours"))
    produce = logging.LogRecord(
        "aiokafka.producer.sender", logging.WARNING, __file__, 1,
        "Got error produce response: %s", ("NodeNotReadyError: node 1 not ready",), None,
    )  # fmt: skip
    assert not noise.filter(produce)
    produce.args = ("NotEnoughReplicasError: 1 of 3",)
    assert noise.filter(produce)


def test_budget_setting_defaults_and_rejects_negative() -> None:
    """AGENTLEDGER_OUTAGE_BUDGET_S defaults to 120 s and refuses a negative value."""
    assert CommonSettings().outage_budget_s == 120.0
    with pytest.raises(ValueError, match="outage_budget_s"):
        CommonSettings(outage_budget_s=-1)
