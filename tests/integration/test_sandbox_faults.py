"""Fault injection in a real sandbox process, as a worker it does not control would meet it."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from agentledger.errors import ProviderUnavailableError
from agentledger.providers import EffectRequest, FaultRule, HttpProvider
from agentledger.providers.sandbox import SandboxClient, SandboxProcess

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SandboxProcess]:
    """One sandbox process for the module; each test uses its own keys and clears its faults."""
    db = Path(tmp_path_factory.mktemp("sandbox-faults")) / "effects.sqlite3"
    async with SandboxProcess(db) as process:
        yield process


@pytest.fixture
async def client(sandbox: SandboxProcess) -> AsyncIterator[SandboxClient]:
    """Inspection client; faults are cleared after each test."""
    async with SandboxClient(sandbox.url) as inspector:
        try:
            yield inspector
        finally:
            await inspector.clear_faults()


def key() -> str:
    return f"faults-{uuid.uuid4().hex}"


def email(to: str = "customer@example.com") -> EffectRequest:
    return EffectRequest(kind="emails", identity={"to": to}, free_text={"body": "Your refund."})


async def keys_performed(client: SandboxClient) -> list[str]:
    return [effect.idempotency_key for effect in await client.effects()]


async def test_drop_after_commit_by_header(sandbox: SandboxProcess, client: SandboxClient) -> None:
    """With the per-request header the client sees a dropped connection, but the effect exists."""
    k = key()
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectionError):
            async with http.post(
                f"{sandbox.url}/v1/emails",
                json={"to": "a@example.com"},
                headers={"Idempotency-Key": k, "X-Sandbox-Fault": "drop-after-commit"},
            ):
                pass
    assert k in await keys_performed(client)
    async with HttpProvider(sandbox.url) as provider:
        found = await provider.lookup("emails", k)
    assert found.found


async def test_drop_after_commit_rule_hits_once(
    sandbox: SandboxProcess, client: SandboxClient
) -> None:
    """An armed rule drops the answer of the next payment only; lookup then finds it."""
    await client.set_faults(FaultRule(mode="drop-after-commit", kind="payments", times=1))
    first, second = key(), key()
    payment = EffectRequest(kind="payments", identity={"amount": 300, "currency": "eur"})
    async with HttpProvider(sandbox.url) as provider:
        with pytest.raises(ProviderUnavailableError):
            await provider.perform(payment, first)
        answered = await provider.perform(payment, second)
        found = await provider.lookup("payments", first)
    performed = await keys_performed(client)
    assert first in performed
    assert second in performed
    assert found.found
    assert found.result is not None
    assert found.result.external_ref != answered.external_ref
    assert await client.faults() == []


async def test_error_before_commit_stores_nothing(
    sandbox: SandboxProcess, client: SandboxClient
) -> None:
    """error-before-commit answers 503, stores nothing, and the lookup says not found."""
    k = key()
    await client.set_faults(FaultRule(mode="error-before-commit", key=k))
    async with HttpProvider(sandbox.url) as provider:
        with pytest.raises(ProviderUnavailableError) as caught:
            await provider.perform(email(), k)
        assert not (await provider.lookup("emails", k)).found
    assert caught.value.status == 503
    assert k not in await keys_performed(client)
    assert (await client.lookups())[k] == 1


async def test_down_makes_lookups_unavailable(
    sandbox: SandboxProcess, client: SandboxClient
) -> None:
    """A down sandbox cannot answer lookups (unknowable, not "not found") until it recovers."""
    k = key()
    async with HttpProvider(sandbox.url) as provider:
        await provider.perform(email(), k)
        await client.set_faults(FaultRule(mode="down"))
        with pytest.raises(ProviderUnavailableError):
            await provider.lookup("emails", k)
        await client.clear_faults()
        assert (await provider.lookup("emails", k)).found
    assert (await client.lookups())[k] == 1


async def test_latency_applies_to_lookups(sandbox: SandboxProcess, client: SandboxClient) -> None:
    """A lookup slower than the client's timeout is unavailable; the latency rule is honoured."""
    k = key()
    await client.set_faults(FaultRule(latency_ms=500, ops=frozenset({"lookup"})))
    async with HttpProvider(sandbox.url, timeout_s=0.1) as provider:
        with pytest.raises(ProviderUnavailableError):
            await provider.lookup("emails", k)
        await provider.perform(email(), k)
    assert k in await keys_performed(client)


async def test_faults_armed_at_start(tmp_path: Path) -> None:
    """Fault rules given at start are armed before the first request."""
    async with (
        SandboxProcess(tmp_path / "down.sqlite3", faults=[FaultRule(mode="down", times=1)]) as sb,
        HttpProvider(sb.url) as provider,
    ):
        with pytest.raises(ProviderUnavailableError):
            await provider.lookup("emails", "k-start")
        assert not (await provider.lookup("emails", "k-start")).found
