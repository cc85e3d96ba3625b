"""The provider port's contract, run against the memory provider and the real sandbox over HTTP."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from agentledger.errors import (
    ProviderConflictError,
    ProviderIdentityConflictError,
    ProviderRequestError,
    ProviderUnavailableError,
)
from agentledger.providers import (
    CompensatingProvider,
    EffectRequest,
    FaultRule,
    HttpProvider,
    MemoryProvider,
    supports_compensation,
)
from agentledger.providers.sandbox import SandboxClient, SandboxProcess


class Harness(Protocol):
    """A provider under test plus a view of what it actually did."""

    @property
    def provider(self) -> CompensatingProvider:
        """The provider under test."""
        ...

    async def performed(self, key: str) -> int:
        """How many effects the provider stored under ``key``."""
        ...

    async def lookups(self, key: str) -> int:
        """How many lookups of ``key`` it answered."""
        ...

    async def set_faults(self, *rules: FaultRule) -> None:
        """Arm fault rules."""
        ...


@dataclass
class MemoryHarness:
    """Harness over a MemoryProvider."""

    provider: MemoryProvider

    async def performed(self, key: str) -> int:
        return sum(1 for effect in self.provider.effects if effect.idempotency_key == key)

    async def lookups(self, key: str) -> int:
        return self.provider.lookups[key]

    async def set_faults(self, *rules: FaultRule) -> None:
        self.provider.set_faults(*rules)


@dataclass
class SandboxHarness:
    """Harness over an HttpProvider talking to a sandbox subprocess."""

    provider: HttpProvider
    client: SandboxClient

    async def performed(self, key: str) -> int:
        return sum(1 for effect in await self.client.effects() if effect.idempotency_key == key)

    async def lookups(self, key: str) -> int:
        return (await self.client.lookups()).get(key, 0)

    async def set_faults(self, *rules: FaultRule) -> None:
        await self.client.set_faults(*rules)


def new_key() -> str:
    return f"contract-{uuid.uuid4().hex}"


def payment(amount: int = 1250, memo: str = "refund for order 42") -> EffectRequest:
    return EffectRequest(
        kind="payments",
        identity={"recipient": "cus_1", "amount": amount, "currency": "eur"},
        free_text={"memo": memo},
    )


class ProviderContract:
    """Behaviours every provider must show; subclasses supply the ``harness`` fixture."""

    async def test_performs_once_and_returns_a_reference(self, harness: Harness) -> None:
        """A first call performs the effect once and answers the provider's object id."""
        key = new_key()
        result = await harness.provider.perform(payment(), key)
        assert result.external_ref
        assert len(result.response_hash) == 64
        assert await harness.performed(key) == 1

    async def test_repeat_with_same_identity_returns_original(self, harness: Harness) -> None:
        """A repeat with the same identity and other free text returns the first object as is."""
        key = new_key()
        first = await harness.provider.perform(payment(memo="first words"), key)
        again = await harness.provider.perform(payment(memo="other words"), key)
        assert again == first
        payload = again.response["payload"]
        assert isinstance(payload, dict)
        assert payload["memo"] == "first words"
        assert await harness.performed(key) == 1

    async def test_repeat_with_other_identity_conflicts(self, harness: Harness) -> None:
        """Same key, different identity raises a conflict naming both identity hashes."""
        key = new_key()
        await harness.provider.perform(payment(amount=1250), key)
        with pytest.raises(ProviderIdentityConflictError) as caught:
            await harness.provider.perform(payment(amount=9999), key)
        assert caught.value.recorded_hash == payment(amount=1250).identity_hash
        assert caught.value.new_hash == payment(amount=9999).identity_hash
        assert await harness.performed(key) == 1

    async def test_same_key_for_another_kind_conflicts(self, harness: Harness) -> None:
        """A key already used by one kind of effect cannot perform another kind."""
        key = new_key()
        await harness.provider.perform(payment(), key)
        email = EffectRequest(kind="emails", identity={"to": "a@example.com"})
        with pytest.raises(ProviderConflictError):
            await harness.provider.perform(email, key)
        assert await harness.performed(key) == 1

    async def test_concurrent_repeats_perform_once(self, harness: Harness) -> None:
        """Concurrent calls with one key perform one effect and all answer the same object."""
        key = new_key()
        results = await asyncio.gather(
            *(harness.provider.perform(payment(), key) for _ in range(8))
        )
        assert len({r.external_ref for r in results}) == 1
        assert await harness.performed(key) == 1

    async def test_distinct_keys_are_distinct_effects(self, harness: Harness) -> None:
        """Two keys with identical requests are two effects."""
        first, second = new_key(), new_key()
        a = await harness.provider.perform(payment(), first)
        b = await harness.provider.perform(payment(), second)
        assert a.external_ref != b.external_ref

    async def test_lookup_finds_what_was_performed(self, harness: Harness) -> None:
        """A lookup by key answers the same reference and response hash as the perform did."""
        key = new_key()
        performed = await harness.provider.perform(payment(), key)
        found = await harness.provider.lookup("payments", key)
        assert found.found
        assert found.result == performed
        assert await harness.lookups(key) == 1

    async def test_lookup_of_unknown_key_finds_nothing(self, harness: Harness) -> None:
        """A lookup of a key never used answers not-found, is counted, and performs nothing."""
        key = new_key()
        found = await harness.provider.lookup("payments", key)
        assert not found.found
        assert found.result is None
        assert await harness.performed(key) == 0
        assert await harness.lookups(key) == 1

    async def test_lookup_under_another_kind_finds_nothing(self, harness: Harness) -> None:
        """A key is looked up within its kind only."""
        key = new_key()
        await harness.provider.perform(payment(), key)
        assert not (await harness.provider.lookup("emails", key)).found

    async def test_compensates_once(self, harness: Harness) -> None:
        """A compensation is performed once per key and refers to the object it undoes."""
        assert supports_compensation(harness.provider)
        target = await harness.provider.perform(payment(), new_key())
        comp_key = new_key()
        undone = await harness.provider.compensate("payments", target.external_ref, comp_key)
        again = await harness.provider.compensate("payments", target.external_ref, comp_key)
        assert again == undone
        assert undone.response["compensates"] == target.external_ref
        assert await harness.performed(comp_key) == 1

    async def test_second_compensation_under_new_key_conflicts(self, harness: Harness) -> None:
        """An object compensated once cannot be compensated again under another key."""
        target = await harness.provider.perform(payment(), new_key())
        await harness.provider.compensate("payments", target.external_ref, new_key())
        other = new_key()
        with pytest.raises(ProviderConflictError):
            await harness.provider.compensate("payments", target.external_ref, other)
        assert await harness.performed(other) == 0

    async def test_compensating_unknown_object_is_refused(self, harness: Harness) -> None:
        """Compensating an object the provider never made is a request error (404)."""
        with pytest.raises(ProviderRequestError) as caught:
            await harness.provider.compensate("payments", "pay_doesnotexist", new_key())
        assert caught.value.status == 404

    async def test_down_provider_is_unavailable_for_everything(self, harness: Harness) -> None:
        """A provider that is down raises ProviderUnavailableError for performs and lookups."""
        key = new_key()
        await harness.set_faults(FaultRule(mode="down"))
        with pytest.raises(ProviderUnavailableError):
            await harness.provider.perform(payment(), key)
        with pytest.raises(ProviderUnavailableError):
            await harness.provider.lookup("payments", key)
        await harness.set_faults()
        assert await harness.performed(key) == 0

    async def test_answer_dropped_after_commit(self, harness: Harness) -> None:
        """A lost answer is unavailable to the caller, yet lookup finds the effect it committed."""
        key = new_key()
        await harness.set_faults(FaultRule(mode="drop-after-commit", key=key, times=1))
        with pytest.raises(ProviderUnavailableError):
            await harness.provider.perform(payment(), key)
        assert await harness.performed(key) == 1
        found = await harness.provider.lookup("payments", key)
        assert found.found
        assert found.result is not None
        again = await harness.provider.perform(payment(), key)
        assert again.external_ref == found.result.external_ref
        assert await harness.performed(key) == 1

    async def test_error_before_commit_stores_nothing(self, harness: Harness) -> None:
        """A failure before the commit is unavailable, stores nothing; a resend performs once."""
        key = new_key()
        await harness.set_faults(FaultRule(mode="error-before-commit", key=key, times=1))
        with pytest.raises(ProviderUnavailableError):
            await harness.provider.perform(payment(), key)
        assert not (await harness.provider.lookup("payments", key)).found
        await harness.provider.perform(payment(), key)
        assert await harness.performed(key) == 1


class TestMemoryProvider(ProviderContract):
    """The contract on the in-memory provider."""

    @pytest.fixture
    async def harness(self) -> AsyncIterator[Harness]:
        async with MemoryProvider() as provider:
            yield MemoryHarness(provider)


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SandboxProcess]:
    """One sandbox subprocess for the module; tests use unique keys."""
    db = Path(tmp_path_factory.mktemp("sandbox-contract")) / "effects.sqlite3"
    async with SandboxProcess(db, synchronous="NORMAL") as process:
        yield process


@pytest.mark.integration
class TestHttpProviderOnSandbox(ProviderContract):
    """The contract on the HTTP adapter talking to a real sandbox process."""

    @pytest.fixture
    async def harness(self, sandbox: SandboxProcess) -> AsyncIterator[Harness]:
        async with (
            HttpProvider(sandbox.url, name="sandbox", timeout_s=5) as provider,
            SandboxClient(sandbox.url) as client,
        ):
            try:
                yield SandboxHarness(provider, client)
            finally:
                await client.clear_faults()
