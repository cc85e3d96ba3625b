"""The provider adapter's HTTP/1.1 client against loopback servers that write scripted bytes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agentledger.providers.wire import HttpPool, WireError, WireUnavailable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
Serve = Callable[[Handler], Awaitable[HttpPool]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start a server with a handler and give a pool to it; everything is closed afterwards."""
    servers: list[asyncio.Server] = []
    pools: list[HttpPool] = []

    async def start(handler: Handler) -> HttpPool:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        servers.append(server)
        pools.append(
            HttpPool(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", connect_timeout_s=1)
        )
        return pools[-1]

    yield start
    for pool in pools:
        await pool.close()
    for server in servers:
        server.close()
        await server.wait_closed()


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def answering(answers: list[bytes], seen: list[bytes]) -> Handler:
    """Keep the connection, answer each request with the next of ``answers``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(b"<connect>")
        try:
            while answers:
                seen.append(await reader.readuntil(b"\r\n\r\n"))
                writer.write(answers.pop(0))
                await writer.drain()
            await reader.read()
        finally:
            writer.close()

    return handle


def once_then_close(raw: bytes, *, abort: bool = False) -> Handler:
    """Read one request head, write ``raw``, close the connection."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(raw)
        await writer.drain()
        if abort:
            writer.transport.abort()
        else:
            writer.close()

    return handle


async def get(pool: HttpPool, target: str = "/v1/x") -> tuple[int, bytes]:
    answer = await pool.request("GET", pool.request_bytes("GET", target, {}, None))
    return answer.status, answer.body


async def test_keep_alive_reuses_one_connection(serve: Serve) -> None:
    """Sequential requests go over one kept-alive connection, each getting its own answer."""
    seen: list[bytes] = []
    pool = await serve(answering([ok(b"one"), ok(b"two")], seen))
    assert await get(pool, "/a") == (200, b"one")
    assert await get(pool, "/b?k=1") == (200, b"two")
    assert seen.count(b"<connect>") == 1
    assert seen[1].startswith(b"GET /a HTTP/1.1\r\nHost: 127.0.0.1:")
    assert seen[2].startswith(b"GET /b?k=1 HTTP/1.1\r\n")


async def test_chunked_and_interim_answers(serve: Serve) -> None:
    """A chunked body (with a chunk extension and trailers) and an answer after a 100 Continue
    are read whole, and the connection goes on being used."""
    chunked = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    seen: list[bytes] = []
    pool = await serve(answering([chunked, b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"then")], seen))
    assert await get(pool) == (200, b"abcde")
    assert await get(pool) == (200, b"then")
    assert seen.count(b"<connect>") == 1


async def test_close_delimited_body(serve: Serve) -> None:
    """An HTTP/1.0 answer without a length ends at the close, and the next request connects
    anew."""
    pool = await serve(once_then_close(b"HTTP/1.0 200 OK\r\n\r\nthe whole body"))
    assert await get(pool) == (200, b"the whole body")
    assert await get(pool) == (200, b"the whole body")


@pytest.mark.parametrize(
    "raw",
    [
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",
    ],
)
async def test_garbled_or_cut_answers_are_unavailable(serve: Serve, raw: bytes) -> None:
    """A non-HTTP, malformed or cut-off answer is WireUnavailable (the outcome is unknown)."""
    pool = await serve(once_then_close(raw))
    with pytest.raises(WireUnavailable):
        await get(pool)


async def test_a_closed_kept_alive_connection_is_not_reused(serve: Serve) -> None:
    """A connection the server closed while it was idle is dropped, the next request connects
    anew."""
    seen: list[bytes] = []

    async def answer_then_drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(ok(b"fine"))
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.transport.abort()  # as a server ending an idle connection, without saying so

    pool = await serve(answer_then_drop)
    assert await get(pool) == (200, b"fine")
    await asyncio.sleep(0.2)
    assert await get(pool) == (200, b"fine")
    assert len(seen) == 2


@pytest.mark.parametrize(("method", "sent_again"), [("GET", True), ("POST", False)])
async def test_only_a_get_is_sent_again_when_a_reused_connection_drops_it(
    serve: Serve, method: str, *, sent_again: bool
) -> None:
    """A request on a reused connection that the server drops before any byte of an answer is
    sent once more on a new connection if it is a GET, never if it is a POST."""
    heads: list[bytes] = []

    async def drop_the_second(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(ok(b"fine"))
        await writer.drain()
        heads.append(await reader.readuntil(b"\r\n\r\n"))
        writer.transport.abort()

    pool = await serve(drop_the_second)
    assert await get(pool) == (200, b"fine")
    request = pool.request_bytes(method, "/p", {}, b"{}" if method == "POST" else None)
    if sent_again:
        assert (await pool.request(method, request)).body == b"fine"
        assert len(heads) == 3
    else:
        with pytest.raises(WireUnavailable):
            await pool.request(method, request)
        assert len(heads) == 2


async def test_refused_connection_and_bad_headers() -> None:
    """Nothing listening is WireUnavailable; a header value with a line break and a non-HTTP URL
    are refused."""
    pool = HttpPool("http://127.0.0.1:1", connect_timeout_s=1)
    with pytest.raises(WireUnavailable):
        await get(pool)
    with pytest.raises(WireError):
        pool.request_bytes("GET", "/", {"X-Key": "a\r\nInjected: 1"}, None)
    with pytest.raises(WireError):
        HttpPool("ftp://example.com", connect_timeout_s=1)
    await pool.close()
