"""The sandbox's HTTP API served in-process: validation, inspection, fault endpoints, its store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from agentledger.errors import ProviderUnavailableError
from agentledger.providers import EffectRequest, FaultRule, HttpProvider
from agentledger.providers.faults import FaultSet
from agentledger.providers.sandbox import SandboxClient
from agentledger.providers.sandbox.server import create_app
from agentledger.providers.sandbox.store import SqliteEffectStore


@dataclass
class Served:
    """A sandbox app on a loopback port, with a raw session and an inspection client."""

    url: str
    http: aiohttp.ClientSession
    client: SandboxClient

    async def call(
        self, method: str, path: str, *, headers: dict[str, str] | None = None, body: Any = None
    ) -> tuple[int, Any, dict[str, str]]:
        async with self.http.request(method, self.url + path, headers=headers, json=body) as resp:
            return resp.status, await resp.json(), dict(resp.headers)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """The sandbox app over a fresh SQLite file."""
    async with SqliteEffectStore(tmp_path / "sandbox.sqlite3", synchronous="NORMAL") as store:
        runner = web.AppRunner(create_app(store, FaultSet()), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        url = f"http://{host}:{port}"
        try:
            async with aiohttp.ClientSession() as http, SandboxClient(url) as client:
                yield Served(url, http, client)
        finally:
            await runner.cleanup()


async def test_missing_key_is_refused_and_nothing_stored(served: Served) -> None:
    """A perform without Idempotency-Key is a 400 and performs nothing."""
    status, body, _ = await served.call("POST", "/v1/payments", body={"amount": 1})
    assert status == 400
    assert "Idempotency-Key" in body["error"]["message"]
    assert await served.client.effects() == []


@pytest.mark.parametrize(
    ("path", "headers", "body"),
    [
        ("/v1/effects", {"Idempotency-Key": "k"}, {"amount": 1}),
        ("/v1/Payments", {"Idempotency-Key": "k"}, {"amount": 1}),
        ("/v1/payments", {"Idempotency-Key": "k"}, [1, 2]),
        ("/v1/payments", {"Idempotency-Key": "k", "X-Identity-Fields": "amount,to"}, {"amount": 1}),
        ("/v1/payments", {"Idempotency-Key": "k", "X-Sandbox-Fault": "explode"}, {"amount": 1}),
    ],
)
async def test_malformed_performs_are_refused(
    served: Served, path: str, headers: dict[str, str], body: Any
) -> None:
    """Reserved or bad kinds, non-object bodies, missing identity fields, bad faults give 400."""
    status, answer, _ = await served.call("POST", path, headers=headers, body=body)
    assert status == 400
    assert answer["error"]["type"] == "invalid_request"
    assert await served.client.effects() == []


async def test_lookup_needs_a_key(served: Served) -> None:
    """A lookup without idempotency_key is a 400, not a "not found"."""
    status, _, _ = await served.call("GET", "/v1/payments")
    assert status == 400


async def test_replay_is_flagged(served: Served) -> None:
    """A repeat is answered with Idempotent-Replayed: true and the same object."""
    headers = {"Idempotency-Key": "k-replay", "X-Identity-Fields": "amount"}
    _, first, first_headers = await served.call(
        "POST", "/v1/payments", headers=headers, body={"amount": 1, "memo": "a"}
    )
    _, again, again_headers = await served.call(
        "POST", "/v1/payments", headers=headers, body={"amount": 1, "memo": "b"}
    )
    assert again == first
    assert "Idempotent-Replayed" not in first_headers
    assert again_headers["Idempotent-Replayed"] == "true"


async def test_without_identity_header_every_field_is_identity(served: Served) -> None:
    """With no X-Identity-Fields, a repeat that changes any field is a conflict (as at Stripe)."""
    headers = {"Idempotency-Key": "k-all"}
    await served.call("POST", "/v1/emails", headers=headers, body={"to": "a", "body": "x"})
    status, answer, _ = await served.call(
        "POST", "/v1/emails", headers=headers, body={"to": "a", "body": "y"}
    )
    assert status == 409
    assert answer["error"]["recorded_identity_hash"] != answer["error"]["request_identity_hash"]


async def test_effects_can_be_filtered_by_kind(served: Served) -> None:
    """GET /v1/effects?kind= lists only that kind, in the order performed."""
    for n, kind in enumerate(["payments", "emails", "payments"]):
        await served.call(
            "POST", f"/v1/{kind}", headers={"Idempotency-Key": f"k{n}"}, body={"n": n}
        )
    payments = await served.client.effects("payments")
    assert [e.idempotency_key for e in payments] == ["k0", "k2"]
    assert [e.payload for e in payments] == [{"n": 0}, {"n": 2}]


async def test_fault_rules_can_be_set_read_and_cleared(served: Served) -> None:
    """POST replaces the rules, GET shows uses left, DELETE clears, bad rules are refused."""
    armed = await served.client.set_faults(FaultRule(latency_ms=1, times=2))
    assert [rule.times for rule in armed] == [2]
    status, _, _ = await served.call("POST", "/v1/_faults", body={"rules": [{"mode": "boom"}]})
    assert status == 400
    assert await served.client.faults() == armed
    await served.client.clear_faults()
    assert await served.client.faults() == []


async def test_down_leaves_inspection_working(served: Served) -> None:
    """While down, lookups fail with 503 but effects, lookups and health still answer."""
    await served.client.set_faults(FaultRule(mode="down"))
    status, _, _ = await served.call("GET", "/v1/payments?idempotency_key=k")
    assert status == 503
    assert await served.client.healthy()
    assert await served.client.effects() == []
    assert await served.client.lookups() == {}


async def test_client_that_times_out_during_latency_still_gets_the_effect(served: Served) -> None:
    """Latency delays the request; a client giving up meanwhile is unavailable, yet it happens."""
    await served.client.set_faults(FaultRule(latency_ms=400, kind="payments"))
    request = EffectRequest(kind="payments", identity={"amount": 7})
    async with HttpProvider(served.url, timeout_s=0.1) as provider:
        with pytest.raises(ProviderUnavailableError):
            await provider.perform(request, "k-late")
        with pytest.raises(ProviderUnavailableError):
            await provider.lookup("payments", "k-late")
    for _ in range(200):  # the delayed request completes on its own; wait up to 10 s
        if await served.client.effects():
            break
        await asyncio.sleep(0.05)
    assert [e.idempotency_key for e in await served.client.effects()] == ["k-late"]


async def test_store_keeps_effects_across_reopen(tmp_path: Path) -> None:
    """Effects and lookup counts committed by the store are there after it is reopened."""
    path = tmp_path / "reopen.sqlite3"
    async with SqliteEffectStore(path) as store:
        first, created = await store.perform(
            kind="tickets",
            key="k1",
            payload={"title": "t"},
            identity={"title": "t"},
            token="abc",
            created_at="2024-01-01T00:00:00.000000Z",
        )
        await store.lookup("tickets", "k1")
    assert created
    async with SqliteEffectStore(path) as store:
        again, created_again = await store.perform(
            kind="tickets",
            key="k1",
            payload={"title": "t"},
            identity={"title": "t"},
            token="def",
            created_at="2025-01-01T00:00:00.000000Z",
        )
        assert await store.effects() == [first]
        assert await store.lookups() == {"k1": 1}
    assert not created_again
    assert again == first
    assert first.id == "tkt_abc"


@pytest.mark.parametrize("depth", [100, 5_000])
async def test_a_body_nested_thousands_deep_is_a_400_not_a_500(served: Served, depth: int) -> None:
    """JSON nested 5,000 deep is refused as a bad request (the HTTP provider would read a 500 as
    "outcome unknown"), and nothing is performed."""
    raw = '{"a": ' + "[" * depth + "1" + "]" * depth + "}"
    headers = {"Idempotency-Key": "deep", "Content-Type": "application/json"}
    async with served.http.post(served.url + "/v1/payments", data=raw, headers=headers) as resp:
        status, body = resp.status, await resp.json()
    assert status == 400
    assert "nests deeper" in body["error"]["message"]
    assert await served.client.effects() == []
