"""A small keep-alive HTTP/1.1 client: the provider adapter's connections to one base URL.

A lookup is one short request and one small JSON answer, made once per intent by the reconciler
and once per resumed effect by a worker; through aiohttp's general client (its request object,
tracing hooks, cookie jar, header multidicts) the adapter spent about 270 µs of CPU on each,
through this one about 130 µs (the bare exchange about 70 µs).
It speaks what an ``Idempotency-Key`` API needs and nothing more: requests with a JSON body or
none; answers delimited by ``Content-Length``, chunked, or by the connection's close; 1xx
interim answers skipped; no redirects followed, no compression asked for, no proxies, no
cookies. ``https://`` URLs go over TLS with the default verification.

Connections are reused (LIFO, idle at most ``KEEPALIVE_S``) and at most ``max_connections`` are
open at once. Anything that leaves the answer unknown, a refused or dropped connection, a
timeout, a garbled or oversized answer, raises :class:`WireUnavailable`; the caller decides what
that means (for a provider: outcome UNKNOWN). Like aiohttp, a GET whose reused connection turns
out to have been closed by the server before any byte of the answer came is sent once more on a
new connection; a POST never is.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

#: An idle connection older than this is closed rather than reused (servers close theirs).
KEEPALIVE_S = 15.0
#: Answers larger than these are refused as garbled.
MAX_HEAD_BYTES = 64 * 1024
MAX_BODY_BYTES = 16 * 1024 * 1024
_NO_BODY_STATUSES = frozenset({204, 304})


class WireError(Exception):
    """The request could not be made as given (a bad header value)."""


class WireUnavailable(WireError):  # noqa: N818 - reads as what happened: the answer is not there
    """No complete answer: refused, dropped, timed out or garbled (it may have been acted on)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A complete HTTP answer."""

    status: int
    body: bytes


class _Exchange(asyncio.Protocol):
    """One connection; reads one answer at a time into ``waiter``."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.used_at = time.monotonic()
        self.received_any = False
        self._buf = bytearray()
        self._waiter: asyncio.Future[Answer] | None = None
        #: The answer's status, Content-Length, chunked and keep-alive, once its head is in.
        self._head: tuple[int, int | None, bool, bool] | None = None
        self._keep = True
        self._eof = False

    # --- asyncio.Protocol -----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast("asyncio.Transport", transport)  # a stream connection

    def data_received(self, data: bytes) -> None:
        self.received_any = True
        self._buf += data
        self._advance()

    def eof_received(self) -> bool:
        self._eof = True
        self._advance()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._eof = True
        if self._waiter is not None and not self._waiter.done():
            self._advance()
        if self._waiter is not None and not self._waiter.done():
            why = f": {exc!r}" if exc is not None else ""
            self._fail(f"connection closed before a complete answer{why}")

    # --- requests -------------------------------------------------------------------------

    def reusable(self, now: float) -> bool:
        """Open, idle for less than ``KEEPALIVE_S``, and nothing unread on it."""
        return (
            not self.closed
            and self._keep
            and not self._buf
            and self.transport is not None
            and not self.transport.is_closing()
            and now - self.used_at < KEEPALIVE_S
        )

    def send(self, data: bytes) -> asyncio.Future[Answer]:
        """Write one request; the future gets its answer."""
        if self.transport is None or self.closed or self.transport.is_closing():
            msg = "connection closed before the request was sent"
            raise WireUnavailable(msg)
        self.received_any = False
        self._head = None
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self._waiter

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._keep = False
        if self.transport is not None:
            self.transport.close()

    # --- parsing --------------------------------------------------------------------------

    def _fail(self, why: str) -> None:
        self._keep = False
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(WireUnavailable(why))
        if self.transport is not None:
            self.transport.close()

    def _advance(self) -> None:
        if self._waiter is None or self._waiter.done():
            return
        try:
            answer = self._parse()
        except WireUnavailable as e:
            self._fail(str(e))
            return
        if answer is not None:
            waiter, self._waiter = self._waiter, None
            self.used_at = time.monotonic()
            waiter.set_result(answer)

    def _parse(self) -> Answer | None:
        head = self._head or self._take_head()
        if head is None:
            return None
        status, length, chunked, keep = head
        if chunked:
            body = self._chunked()
        elif length is not None:
            body = self._sized(length)
        else:  # delimited by the server closing the connection
            body, keep = self._until_close(), False
        if body is None:
            return None
        self._keep = keep and not self._buf
        return Answer(status, body)

    def _take_head(self) -> tuple[int, int | None, bool, bool] | None:
        """Consume the answer's head (skipping 1xx interim answers); None until it is here."""
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEAD_BYTES:
                    raise WireUnavailable("answer head too large")
                if self._eof:
                    raise WireUnavailable("connection closed before the answer's head")
                return None
            head = bytes(self._buf[:end])
            del self._buf[: end + 4]
            status, length, chunked, keep = _read_head(head)
            if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
                continue
            if status in _NO_BODY_STATUSES:
                length, chunked = 0, False
            self._head = (status, length, chunked, keep)
            return self._head

    def _sized(self, length: int) -> bytes | None:
        if length > MAX_BODY_BYTES:
            raise WireUnavailable(f"answer body of {length} bytes is too large")
        if len(self._buf) < length:
            if self._eof:
                raise WireUnavailable("connection closed in the middle of the answer")
            return None
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return body

    def _until_close(self) -> bytes | None:
        if len(self._buf) > MAX_BODY_BYTES:
            raise WireUnavailable("answer body too large")
        if not self._eof:
            return None
        body = bytes(self._buf)
        self._buf.clear()
        return body

    def _chunked(self) -> bytes | None:
        """The whole chunked body once it is all here (consumed), else None (nothing consumed)."""
        pos, size_total = 0, 0
        parts: list[bytes] = []
        buf = self._buf
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise WireUnavailable(f"bad chunk size {size_text[:20]!r}") from None
            if size == 0:
                trailer_end = buf.find(b"\r\n\r\n", eol)  # after the trailers, if any
                if trailer_end < 0:
                    break
                del buf[: trailer_end + 4]
                return b"".join(parts)
            size_total += size
            if size_total > MAX_BODY_BYTES:
                raise WireUnavailable("answer body too large")
            start = eol + 2
            if len(buf) < start + size + 2:
                break
            parts.append(bytes(buf[start : start + size]))
            pos = start + size + 2
        if self._eof:
            raise WireUnavailable("connection closed in the middle of a chunked answer")
        return None


def _read_head(head: bytes) -> tuple[int, int | None, bool, bool]:
    """Status, Content-Length (None if absent), chunked, keep-alive of an answer's head."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or len(parts[1]) != 3:
        raise WireUnavailable(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise WireUnavailable(f"bad status in {lines[0][:80]!r}") from None
    keep = parts[0] != b"HTTP/1.0"
    length: int | None = None
    chunked = False
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise WireUnavailable(f"bad header line {line[:80]!r}")
        name = name.strip().lower()
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                raise WireUnavailable(f"bad Content-Length {value[:20]!r}") from None
            if length < 0:
                raise WireUnavailable("negative Content-Length")
        elif name == b"transfer-encoding":
            chunked = value.strip().lower().endswith(b"chunked")
        elif name == b"connection":
            token = value.strip().lower()
            keep = token != b"close" and (keep or token == b"keep-alive")
    return status, (None if chunked else length), chunked, keep


class HttpPool:
    """Keep-alive connections to one origin (scheme, host, port); ``close`` ends them."""

    def __init__(
        self, base_url: str, *, connect_timeout_s: float, max_connections: int = 100
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            msg = f"url {base_url!r} must be http(s)://host[:port][/path]"
            raise WireError(msg)
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        default_port = parts.port is None or parts.port == (443 if self._ssl else 80)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self._host_header = host if default_port else f"{host}:{self._port}"
        #: The path every request's target starts with (the base URL's own path).
        self.prefix = parts.path.rstrip("/")
        self._connect_timeout_s = connect_timeout_s
        self._idle: list[_Exchange] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False

    def request_bytes(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        """The request on the wire (header values with CR or LF are refused)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._host_header}"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                msg = f"header {name!r} has a line break in its name or value"
                raise WireError(msg)
            lines.append(f"{name}: {value}")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        return head + body if body else head

    async def request(self, method: str, data: bytes) -> Answer:
        """Send ``data`` (from :meth:`request_bytes`) and read the answer."""
        if self._closed:
            msg = "the connection pool is closed"
            raise WireUnavailable(msg)
        async with self._slots:
            conn = self._take()
            if conn is not None:
                try:
                    return await self._exchange(conn, data)
                except WireUnavailable:
                    # A server that closed an idle connection as we sent on it: a GET (safe to
                    # repeat) goes once more on a new connection, as aiohttp does.
                    if method != "GET" or conn.received_any:
                        raise
            return await self._exchange(await self._connect(), data)

    async def _exchange(self, conn: _Exchange, data: bytes) -> Answer:
        try:
            answer = await conn.send(data)
        except BaseException:
            conn.close()
            raise
        if not self._closed and conn.reusable(time.monotonic()):
            self._idle.append(conn)
        else:
            conn.close()
        return answer

    def _take(self) -> _Exchange | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable(now):
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Exchange:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                _, conn = await loop.create_connection(
                    _Exchange,
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl is not None else None,
                )
        except TimeoutError:
            msg = f"no connection to {self._host}:{self._port} in {self._connect_timeout_s}s"
            raise WireUnavailable(msg) from None
        except OSError as e:  # refused, unreachable, TLS handshake (ssl.SSLError is an OSError)
            msg = f"cannot connect to {self._host}:{self._port}: {e!r}"
            raise WireUnavailable(msg) from e
        return conn

    async def close(self) -> None:
        """Close every idle connection; busy ones close when their answer is in (idempotent)."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if idle:
            await asyncio.sleep(0)  # let the transports run their close callbacks
