"""The one place that decides how a process pools Redis connections and names their failures."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

import redis.exceptions
from redis.asyncio import BlockingConnectionPool, Redis

from agentledger.errors import AgentLedgerError, ConfigurationError, UnreachableError
from agentledger.redaction import redacted_url

if TYPE_CHECKING:
    from agentledger.settings import CommonSettings

SOCKET_TIMEOUT_S = 5.0
DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_POOL_WAIT_S = 30.0

# What a lost, refused or timed-out connection raises; a pool whose wait ran out raises
# ConnectionError("No connection available."), redis-py's default pool MaxConnectionsError
# (a ConnectionError too).
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    OSError,
)

P = ParamSpec("P")
R = TypeVar("R")


def _pack_command(self: Any, *args: Any) -> list[bytes]:
    """redis-py's ``pack_command`` output, built with one join (its own re-copies the growing
    buffer for every argument, which dominates scripts called with hundreds of arguments)."""
    first = args[0]
    if isinstance(first, str):
        args = (*first.encode().split(), *args[1:])
    elif b" " in first:
        args = (*first.split(), *args[1:])
    encode = self.encoder.encode
    pieces = [b"*%d\r\n" % len(args)]
    for arg in args:
        value = arg if type(arg) is bytes else encode(arg)
        pieces += (b"$%d\r\n" % len(value), value, b"\r\n")
    return [b"".join(pieces)]


_FAST_CLASSES: dict[type[Any], type[Any]] = {}


def fast_packing(client: Redis) -> Redis:
    """``client`` with its pool's connections packing commands in one join (see
    :func:`_pack_command`); call it before the client's first command."""
    pool = client.connection_pool
    base = pool.connection_class
    if base not in _FAST_CLASSES.values():
        fast = _FAST_CLASSES.get(base)
        if fast is None:
            fast = type(f"FastPack{base.__name__}", (base,), {"pack_command": _pack_command})
            _FAST_CLASSES[base] = fast
        pool.connection_class = fast
    return client


def redis_options(settings: CommonSettings | None, url: str | None = None) -> dict[str, Any]:
    """The TLS keyword arguments of every Redis client here (the one place that decides them).

    A ``rediss://`` URL verifies the server's certificate against AGENTLEDGER_REDIS_SSL_CAFILE
    (or the system's CAs); the ACL user and password travel in the URL. Every
    ``Redis.from_url``/``Redis(...)``/pool in ``services/`` is built with
    ``**redis_options(settings, url)`` (a unit test scans for it); ``settings=None`` is the
    plaintext local stack.
    """
    cafile = settings.redis_ssl_cafile if settings is not None else None
    if cafile is None:
        return {}
    if url is not None and not url.startswith("rediss://"):
        msg = (
            f"AGENTLEDGER_REDIS_SSL_CAFILE is set but Redis at {redacted_url(url)} is not TLS: "
            "use a rediss:// AGENTLEDGER_REDIS_URL, or unset AGENTLEDGER_REDIS_SSL_CAFILE"
        )
        raise ConfigurationError(msg)
    return {"ssl_ca_certs": str(cafile), "ssl_cert_reqs": "required"}


def pooled_client(
    url: str,
    *,
    settings: CommonSettings | None = None,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    wait_s: float = DEFAULT_POOL_WAIT_S,
) -> Redis:
    """A client whose pool makes callers wait up to ``wait_s`` for one of ``max_connections``.

    redis-py's default pool raises MaxConnectionsError past its limit instead; closing the
    client (``aclose``) disconnects this pool too. ``settings`` give the TLS options
    (:func:`redis_options`).
    """
    pool = BlockingConnectionPool.from_url(
        url,
        **redis_options(settings, url),
        max_connections=max_connections,
        timeout=wait_s,
        socket_connect_timeout=SOCKET_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
    )
    return fast_packing(Redis.from_pool(pool))


def redacted(url: str) -> str:
    """The URL without its password nor secret query parameters, for logs and error messages."""
    return redacted_url(url)


class HasEndpoint(Protocol):
    """Something talking to one Redis, which it names (password redacted) in errors."""

    @property
    def endpoint(self) -> str:
        """The Redis URL without its password."""


S = TypeVar("S", bound=HasEndpoint)


def redis_failure(error: BaseException, endpoint: str) -> AgentLedgerError:
    """The error a caller sees for a failed Redis call (UnreachableError, naming the endpoint).

    A refused login is a configuration mistake naming the setting, not "is it running?".
    """
    refused = (redis.exceptions.AuthenticationError, redis.exceptions.AuthorizationError)
    if isinstance(error, refused):
        return ConfigurationError(
            f"Redis at {endpoint} refused the login ({type(error).__name__}: {error}): put the "
            "right password (and user) in AGENTLEDGER_REDIS_URL, e.g. redis://:PASSWORD@host:6379/0"
        )
    text = f"{type(error).__name__}: {error}"
    if "CERTIFICATE_VERIFY_FAILED" in str(error):
        return ConfigurationError(
            f"Redis at {endpoint} presented a certificate this client does not trust "
            f"({_first_line(error)}): set AGENTLEDGER_REDIS_SSL_CAFILE to the CA file that "
            "signed Redis's certificate"
        )
    if endpoint.startswith("redis://"):
        # Still retryable: a Redis restarting closes connections too.
        return UnreachableError("Redis", endpoint, text + tls_hint(endpoint))
    if "WRONG_VERSION_NUMBER" in str(error) or "record layer failure" in str(error):
        return ConfigurationError(
            f"Redis at {endpoint} does not speak TLS ({_first_line(error)}): use redis:// in "
            "AGENTLEDGER_REDIS_URL"
        )
    return UnreachableError("Redis", endpoint, text)


def tls_hint(endpoint: str) -> str:
    """For a plaintext URL, the reminder that a TLS Redis needs rediss:// (else "")."""
    if endpoint.startswith("redis://"):
        return "; if Redis serves TLS, use rediss:// in AGENTLEDGER_REDIS_URL"
    return ""


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0][:200] if str(error) else type(error).__name__


def translated(
    method: Callable[Concatenate[S, P], Awaitable[R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Wrap an async method so connection-level Redis failures become UnreachableError."""

    @functools.wraps(method)
    async def guarded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(self, *args, **kwargs)
        except CONNECTION_ERRORS as e:
            raise redis_failure(e, self.endpoint) from e

    return guarded
