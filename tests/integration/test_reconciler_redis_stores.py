"""The Redis alert store, delivery ledger and webhook dead letter on the real Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from agentledger.alerts.delivery import UndeliveredAlert
from agentledger.alerts.redis_store import (
    RedisAlertStore,
    RedisDeliveryLedger,
    RedisSinkDeadLetter,
)
from agentledger.alerts.store import AlertStore
from agentledger.events.models import Alert
from agentledger.settings import CommonSettings
from tests.unit.test_alerts_store import AlertStoreContract

pytestmark = pytest.mark.integration


@pytest.fixture
async def redis(ledger_settings: CommonSettings) -> AsyncIterator[Redis]:
    """A client on the stack's Redis."""
    assert ledger_settings.redis_url is not None
    client = Redis.from_url(ledger_settings.redis_url)
    try:
        yield client
    finally:
        await client.aclose()


class TestRedisAlertStore(AlertStoreContract):
    """The Redis store passes the same contract as the memory store."""

    @pytest.fixture
    def store(self, redis: Redis, ledger_settings: CommonSettings) -> AlertStore:
        """A store under the test's key prefix."""
        return RedisAlertStore(redis, ledger_settings.key_prefix)


async def test_ledger_claims_once_until_marked(
    redis: Redis, ledger_settings: CommonSettings
) -> None:
    """Of concurrent claims on one event exactly one wins, and a marked event is never claimed."""
    ledger = RedisDeliveryLedger(redis, ledger_settings.key_prefix)
    wins = await asyncio.gather(*(ledger.claim("webhook", "e1", 60) for _ in range(10)))
    assert wins.count(True) == 1
    await ledger.mark("webhook", "e1")
    assert not await ledger.claim("webhook", "e1", 60)
    assert await ledger.claim("log", "e1", 60)


async def test_expired_claim_can_be_taken_again(
    redis: Redis, ledger_settings: CommonSettings
) -> None:
    """A claim left by a relay that died expires, so the event is delivered by another."""
    ledger = RedisDeliveryLedger(redis, ledger_settings.key_prefix)
    assert await ledger.claim("webhook", "e2", 1)
    for _ in range(40):
        if await ledger.claim("webhook", "e2", 1):
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the claim never expired")


async def test_dead_letter_keeps_newest_first(
    redis: Redis, ledger_settings: CommonSettings
) -> None:
    """Undelivered alerts are listed newest first with why they failed."""
    dead = RedisSinkDeadLetter(redis, ledger_settings.key_prefix, cap=2)
    for n in range(3):
        alert = Alert(alert_id=f"a{n}", code="run.orphaned", severity="warning", summary="s")
        await dead.add(
            UndeliveredAlert(sink="webhook", alert=alert, attempts=3, error=f"e{n}", failed_at=n)
        )
    assert [e.error for e in await dead.entries()] == ["e2", "e1"]
