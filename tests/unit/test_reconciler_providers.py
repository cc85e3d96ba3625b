"""The provider pool: retries inside a pass, backoff across passes, bounded concurrency."""

from __future__ import annotations

import asyncio

import pytest

from agentledger.errors import ProviderRequestError, ProviderUnavailableError
from agentledger.providers.faults import FaultRule
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import (
    EffectRequest,
    LookupResult,
    Provider,
    ProviderResult,
)
from agentledger.reconciler.providers import ProviderPool
from agentledger.reconciler.settings import ProviderPolicy

POLICY = ProviderPolicy(attempts=3, timeout_s=1.0, backoff_base_ms=100, backoff_max_ms=1_000)


async def no_sleep(_: float) -> None:
    """Do not wait in tests."""


def pool(
    adapters: dict[str, Provider], now: list[int], policy: ProviderPolicy = POLICY
) -> ProviderPool:
    """A pool over ``adapters`` with a settable clock and no waiting."""
    return ProviderPool(
        adapters, policy=lambda _: policy, clock=lambda: now[0], sleep=no_sleep, jitter=lambda: 0.0
    )


async def test_transient_failures_are_retried_within_the_pass() -> None:
    """Two unavailable answers then a real one: the lookup succeeds, the provider stays healthy."""
    provider = MemoryProvider(name="p")
    await provider.perform(EffectRequest(kind="payments", identity={"amount": 1}), "k1")
    provider.set_faults(FaultRule(mode="down", times=2))
    p = pool({"p": provider}, [0])
    answer = await p.lookup("p", "payments", "k1")
    assert isinstance(answer, LookupResult)
    assert answer.found
    assert p.available("p")
    assert p.health("p").failures == 0


async def test_an_unavailable_provider_is_backed_off_across_passes() -> None:
    """After all tries fail the provider is left alone for a growing backoff, then tried again."""
    provider = MemoryProvider(name="p", faults=[FaultRule(mode="down")])
    now = [1_000]
    p = pool({"p": provider}, now)
    assert isinstance(await p.lookup("p", "payments", "k1"), ProviderUnavailableError)
    assert sum(provider.lookups.values()) == 0  # "down" answers before counting
    assert not p.available("p")
    now[0] += 100
    assert p.available("p")
    await p.lookup("p", "payments", "k1")
    assert p.health("p").failures == 2
    assert p.health("p").retry_at == now[0] + 200
    provider.clear_faults()
    now[0] += 200
    assert isinstance(await p.lookup("p", "payments", "k1"), LookupResult)
    assert p.health("p").failures == 0


async def test_slow_answers_time_out_as_unavailable() -> None:
    """A lookup slower than the policy's timeout ends as unavailable, not as a hang."""
    provider = MemoryProvider(name="p", faults=[FaultRule(latency_ms=2_000)])
    fast = ProviderPolicy(attempts=1, timeout_s=0.05)
    answer = await pool({"p": provider}, [0], fast).lookup("p", "payments", "k1")
    assert isinstance(answer, ProviderUnavailableError)
    assert "0.05" in str(answer)


class Gauge(MemoryProvider):
    """Counts lookups in flight."""

    def __init__(self) -> None:
        super().__init__(name="g")
        self.now = 0
        self.peak = 0

    async def lookup(self, kind: str, key: str) -> LookupResult:
        """Hold the call open briefly while counting."""
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(0.01)
        self.now -= 1
        return await super().lookup(kind, key)


async def test_concurrency_per_provider_is_bounded() -> None:
    """No more lookups are in flight at one provider than its policy's concurrency."""
    gauge = Gauge()
    p = pool({"g": gauge}, [0], ProviderPolicy(concurrency=3))
    await asyncio.gather(*(p.lookup("g", "payments", f"k{n}") for n in range(20)))
    assert gauge.peak == 3
    assert sum(gauge.lookups.values()) == 20


async def test_unknown_provider_and_missing_compensation_are_explained() -> None:
    """A provider with no adapter, or an adapter that cannot undo, gives an error naming the fix."""

    class LookupOnly(Provider):
        name = "lo"

        async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
            raise AssertionError("the reconciler never performs")

        async def lookup(self, kind: str, key: str) -> LookupResult:
            return LookupResult.missing()

    p = pool({"lo": LookupOnly()}, [0])
    missing = await p.lookup("nope", "payments", "k")
    assert isinstance(missing, ProviderRequestError)
    assert "AGENTLEDGER_RECONCILER_PROVIDERS" in str(missing)
    assert not p.can_compensate("lo")
    refused = await p.compensate("lo", "payments", "pay_1", "k:compensate")
    assert isinstance(refused, ProviderRequestError)
    assert "cannot compensate" in str(refused)


class _Tracked(MemoryProvider):
    """A memory provider that records its start and stop, and can refuse to start."""

    def __init__(self, name: str, *, refuse: bool = False) -> None:
        super().__init__(name=name)
        self.refuse = refuse
        self.started = False
        self.stopped = False

    async def start(self) -> None:
        if self.refuse:
            raise ProviderUnavailableError(f"{self.name} refused to start")
        self.started = True

    async def stop(self) -> None:
        self.stopped = True


async def test_a_pool_whose_adapter_fails_to_start_stops_the_ones_it_started() -> None:
    """The second adapter refusing to start: the first, already started, is stopped again and
    the error reaches the caller (no adapter's connections are left open)."""
    first, second = _Tracked("a"), _Tracked("b", refuse=True)
    p = pool({"a": first, "b": second}, [0])
    with pytest.raises(ProviderUnavailableError, match="b refused to start"):
        async with p:
            pytest.fail("the pool must not start")
    assert first.started
    assert first.stopped
    assert not second.started
