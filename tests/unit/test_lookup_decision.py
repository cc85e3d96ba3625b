"""Resuming an open intent reads the provider's lookup through the core's one decision."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger._core.lookup import decide
from agentledger.errors import IdentityMismatchError
from agentledger.events import EffectIntended, EffectReconciled, RunPaused
from agentledger.providers.hashing import EffectHasher
from agentledger.providers.memory import MemoryProvider
from agentledger.providers.protocol import EffectRequest, LookupResult, ProviderResult
from agentledger.testing import LedgerEnvironment, SimulatedCrash
from agentledger.views.model import EffectView
from agentledger.worker import RunSpec, Step
from tests.langgraph_support import MemoryPorts, thread_config
from tests.unit.test_langgraph_effects import START_STATE, CountingProvider, order_graph

REQUEST = EffectRequest(
    kind="payments", identity={"order": "o1", "amount": 100}, free_text={"memo": "first"}
)
# Another effect that somebody performed under the same key (a key reused by a bug or by hand).
OTHER = EffectRequest(kind="payments", identity={"order": "o2", "amount": 999})


class LostCall(MemoryProvider):
    """The first perform dies before the provider stores anything (the intent stays open)."""

    def __init__(self, name: str) -> None:
        super().__init__(name=name)
        self.calls = 0

    async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
        """Crash on the first call, perform on later ones."""
        self.calls += 1
        if self.calls == 1:
            raise SimulatedCrash("before_provider", "r1")
        return await super().perform(request, key)


async def pay(step: Step) -> Any:
    """One payment effect."""
    done = await step.effect("charge", REQUEST)
    return done.external_ref


async def test_sdk_resume_with_another_identity_under_the_key_is_a_mismatch_not_landed() -> None:
    """The SDK resuming an open intent whose key holds a different effect at the provider
    stops with IdentityMismatchError and a pause; it records no LANDED and sends nothing."""
    spec = RunSpec(run_id="r1", agent="t", plan=("pay",))
    async with LedgerEnvironment() as env:
        env.providers["sandbox"] = provider = LostCall("sandbox")
        with pytest.raises(SimulatedCrash):
            async with env.ledger().run(spec) as run:
                await run.step("pay", pay)
        (key,) = (await env.view("r1")).effects
        await provider.perform(OTHER, key)
        env.expire_leases()
        with pytest.raises(IdentityMismatchError) as raised:
            async with env.ledger().run(spec) as run:
                await run.step("pay", pay)
        keyed = EffectHasher()  # the log's hashes are keyed (the environment's default key)
        assert raised.value.recorded_hash == keyed.identity(OTHER.identity)
        assert raised.value.new_hash == keyed.identity(REQUEST.identity)
        events = await env.events("r1")
        findings = [e.finding for e in events if isinstance(e, EffectReconciled)]
        assert findings == ["UNKNOWN"]
        assert [e.reason for e in events if isinstance(e, RunPaused)] == ["identity_mismatch"]
        assert (await env.view("r1")).effects[key].state == "unknown"
        assert provider.calls == 2  # the crashed call and the out-of-band one: no resend
        assert len(provider.effects) == 1


async def test_langgraph_rerun_with_another_identity_under_the_key_is_a_mismatch() -> None:
    """The LangGraph saver re-running a node whose open intent's key holds a different effect
    at the provider raises IdentityMismatchError and records no LANDED."""
    ports = MemoryPorts()
    provider = CountingProvider(ports)
    config = thread_config("mismatch")

    class Lost(CountingProvider):
        async def perform(self, request: EffectRequest, key: str) -> ProviderResult:
            raise SimulatedCrash("before_provider", "lg.mismatch")

    async with ports.saver(providers={"pay": Lost(ports)}) as doomed:
        with pytest.raises(SimulatedCrash):
            await order_graph(doomed).ainvoke(START_STATE, config)
    intents = [e for e in await ports.log.read_run("lg.mismatch") if isinstance(e, EffectIntended)]
    (intent,) = intents
    await provider.perform(OTHER, intent.idempotency_key)
    async with ports.saver(providers={"pay": provider}) as saver:
        with pytest.raises(IdentityMismatchError):
            await order_graph(saver).ainvoke(None, config)
    events = await ports.log.read_run("lg.mismatch")
    assert [e.finding for e in events if isinstance(e, EffectReconciled)] == ["UNKNOWN"]
    assert provider.calls == 1  # only the out-of-band effect
    assert provider.lookups[intent.idempotency_key] == 1


def test_decide_reads_a_found_effect_with_another_identity_as_a_mismatch() -> None:
    """The one decision: found under the key with another identity hash is UNKNOWN, a mismatch
    naming the hash the provider holds."""
    intent = EffectView(
        idempotency_key="k1",
        step=0,
        ordinal=0,
        effect="charge",
        provider="pay",
        kind="payments",
        identity_hash=REQUEST.identity_hash,
        payload_hash=REQUEST.payload_hash,
    )
    held = ProviderResult.of({"id": "pay_1", "identity_hash": OTHER.identity_hash})
    resolution = decide(intent, LookupResult.of(held))
    assert resolution.finding == "UNKNOWN"
    assert resolution.identity_mismatch
    assert resolution.found_identity_hash == OTHER.identity_hash
    same = ProviderResult.of({"id": "pay_1", "identity_hash": REQUEST.identity_hash})
    assert decide(intent, LookupResult.of(same)).finding == "LANDED"
