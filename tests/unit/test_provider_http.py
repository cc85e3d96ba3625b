"""HttpProvider against a scripted in-process HTTP server: wire shape and error translation."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from agentledger.errors import (
    ProviderConflictError,
    ProviderError,
    ProviderIdentityConflictError,
    ProviderRequestError,
    ProviderUnavailableError,
)
from agentledger.providers import EffectRequest, HttpProvider, ProviderSettings

OBJECT = {"id": "obj_1", "status": "succeeded"}
SCRIPT: dict[str, tuple[int, Any]] = {
    "s500": (500, {"error": {"message": "boom"}}),
    "s503": (503, "Service Unavailable"),
    "s429": (429, {"error": "slow down"}),
    "s400": (400, {"error": {"message": "amount must be positive"}}),
    "s404": (404, {"error": "no such route"}),
    "conflict": (409, {"error": {"message": "key reused"}}),
    "hashconflict": (
        409,
        {
            "error": {
                "message": "identity differs",
                "recorded_identity_hash": "aaa",
                "request_identity_hash": "bbb",
            }
        },
    ),
    "garbage": (200, "<html>not json</html>"),
    "noid": (200, {"status": "succeeded"}),
    "ok": (200, OBJECT),
    "emptylist": (200, []),
    "null": (200, None),
    "emptyobject": (200, {}),
    "onelist": (200, [OBJECT]),
    "data": (200, {"data": [OBJECT]}),
    "dataempty": (200, {"data": []}),
    "many": (200, [OBJECT, OBJECT]),
}


class Scripted:
    """A server answering by kind from SCRIPT, remembering what it received."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str, dict[str, str], Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        kind = request.match_info["kind"]
        body = await request.json() if request.can_read_body else None
        self.received.append((request.method, request.path_qs, dict(request.headers), body))
        if kind == "slow":
            await asyncio.sleep(0.8)
        if kind == "drop" and request.transport is not None:
            request.transport.close()
        status, payload = SCRIPT.get(kind, (200, OBJECT))
        if isinstance(payload, str):
            return web.Response(status=status, text=payload)
        return web.Response(status=status, text=json.dumps(payload))


@pytest.fixture
async def scripted() -> AsyncIterator[tuple[str, Scripted]]:
    """A scripted server on a free loopback port."""
    script = Scripted()
    app = web.Application()
    app.router.add_route("*", "/v1/{kind}", script.handle)
    app.router.add_route("*", "/v1/{kind}/{ref}/compensate", script.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}", script
    finally:
        await runner.cleanup()


def request(kind: str) -> EffectRequest:
    return EffectRequest(
        kind=kind, identity={"currency": "eur", "amount": 5}, free_text={"memo": "hello"}
    )


async def test_perform_sends_key_identity_fields_and_flat_body(
    scripted: tuple[str, Scripted],
) -> None:
    """perform POSTs /v1/{kind} with Idempotency-Key, sorted X-Identity-Fields and a flat body."""
    url, script = scripted
    async with HttpProvider(url) as provider:
        result = await provider.perform(request("ok"), "key-1")
    method, path, headers, body = script.received[0]
    assert (method, path) == ("POST", "/v1/ok")
    assert headers["Idempotency-Key"] == "key-1"
    assert headers["X-Identity-Fields"] == "amount,currency"
    assert body == {"currency": "eur", "amount": 5, "memo": "hello"}
    assert result.external_ref == "obj_1"


async def test_lookup_and_compensate_paths(scripted: tuple[str, Scripted]) -> None:
    """lookup GETs by idempotency_key; compensate POSTs to /v1/{kind}/{ref}/compensate."""
    url, script = scripted
    async with HttpProvider(url) as provider:
        await provider.lookup("ok", "key-2")
        await provider.compensate("ok", "obj/1", "comp-1")
    assert script.received[0][:2] == ("GET", "/v1/ok?idempotency_key=key-2")
    method, path, headers, _ = script.received[1]
    assert (method, path) == ("POST", "/v1/ok/obj%2F1/compensate")
    assert headers["Idempotency-Key"] == "comp-1"


@pytest.mark.parametrize("kind", ["s500", "s503", "s429", "garbage", "noid", "drop", "slow"])
async def test_unknown_outcomes_are_unavailable(scripted: tuple[str, Scripted], kind: str) -> None:
    """5xx, 429, a dropped connection, a timeout or an unreadable 2xx leave the outcome UNKNOWN."""
    url, script = scripted
    async with HttpProvider(url, timeout_s=0.2) as provider:
        with pytest.raises(ProviderUnavailableError):
            await provider.perform(request(kind), "key-u")
    assert len(script.received) == 1, "the adapter must never retry on its own"


async def test_refused_connection_is_unavailable() -> None:
    """Nothing listening on the port is ProviderUnavailableError, not a crash."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with HttpProvider(f"http://127.0.0.1:{port}") as provider:
        with pytest.raises(ProviderUnavailableError):
            await provider.lookup("payments", "key-r")


async def test_conflicts(scripted: tuple[str, Scripted]) -> None:
    """409 is a conflict; when the body names both hashes the error carries them."""
    url, _ = scripted
    async with HttpProvider(url) as provider:
        with pytest.raises(ProviderConflictError) as plain:
            await provider.perform(request("conflict"), "key-c")
        with pytest.raises(ProviderIdentityConflictError) as named:
            await provider.perform(request("hashconflict"), "key-c")
    assert not isinstance(plain.value, ProviderIdentityConflictError)
    assert (named.value.recorded_hash, named.value.new_hash) == ("aaa", "bbb")


@pytest.mark.parametrize(("kind", "status"), [("s400", 400), ("s404", 404)])
async def test_client_errors_are_request_errors(
    scripted: tuple[str, Scripted], kind: str, status: int
) -> None:
    """Other 4xx answers to a perform are request errors carrying the status and the message."""
    url, _ = scripted
    async with HttpProvider(url) as provider:
        with pytest.raises(ProviderRequestError) as caught:
            await provider.perform(request(kind), "key-4")
    assert caught.value.status == status


@pytest.mark.parametrize(
    ("kind", "found"),
    [
        ("s404", False),
        ("emptylist", False),
        ("null", False),
        ("emptyobject", False),
        ("dataempty", False),
        ("ok", True),
        ("onelist", True),
        ("data", True),
    ],
)
async def test_lookup_answer_shapes(scripted: tuple[str, Scripted], kind: str, found: bool) -> None:
    """A lookup reads 404 and empty answers as not found, an object (alone or listed) as found."""
    url, _ = scripted
    async with HttpProvider(url) as provider:
        answer = await provider.lookup(kind, "key-l")
    assert answer.found is found
    if found:
        assert answer.result is not None
        assert answer.result.external_ref == "obj_1"


async def test_lookup_with_several_objects_is_an_error(scripted: tuple[str, Scripted]) -> None:
    """A provider answering several objects for one key is not trusted either way."""
    url, _ = scripted
    async with HttpProvider(url) as provider:
        with pytest.raises(ProviderError):
            await provider.lookup("many", "key-m")


async def test_lookup_unavailable_on_5xx(scripted: tuple[str, Scripted]) -> None:
    """A 5xx lookup is unknowable, never "not found"."""
    url, _ = scripted
    async with HttpProvider(url) as provider:
        with pytest.raises(ProviderUnavailableError):
            await provider.lookup("s503", "key-5")


async def test_must_be_started() -> None:
    """Calling a provider outside its context raises a clear error; stop is idempotent."""
    provider = HttpProvider("http://127.0.0.1:1")
    with pytest.raises(ProviderError, match="not started"):
        await provider.lookup("payments", "k")
    await provider.stop()
    await provider.stop()


def test_built_from_settings() -> None:
    """from_settings takes the URL and both timeouts from ProviderSettings."""
    settings = ProviderSettings(provider_url="http://127.0.0.1:9/", provider_timeout_s=3)
    provider = HttpProvider.from_settings(settings, name="pay")
    assert provider.base_url == "http://127.0.0.1:9"
    assert provider.name == "pay"
    with pytest.raises(ProviderRequestError):
        HttpProvider.from_settings(ProviderSettings(provider_url=None))


def test_settings_refuse_non_http_urls() -> None:
    """A provider URL must be http(s)."""
    with pytest.raises(ValueError, match="http"):
        ProviderSettings(provider_url="ftp://example.com")
