"""The one place that decides how a process pools Redis connections and names their failures."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

import redis.exceptions
from redis.asyncio import BlockingConnectionPool, ConnectionPool, Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection

from agentledger.errors import AgentLedgerError, ConfigurationError, UnreachableError
from agentledger.outage import ride_out
from agentledger.redaction import redacted_url

if TYPE_CHECKING:
    from agentledger.settings import CommonSettings

try:
    from redis.driver_info import DriverInfo
except ImportError:  # redis < 7 names no driver on its connections
    _DRIVER: dict[str, Any] = {}
else:
    # Built once: left to redis-py, every new connection reads the package's version from its
    # installed metadata (a scan of site-packages, about 5 ms: a pool of 64 paid 0.3 s).
    _DRIVER = {"driver_info": DriverInfo()}

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
    # a Redis Cluster in a failover: a slot without a primary, or a node that is not ready
    redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
    redis.exceptions.SlotNotCoveredError,
)

P = ParamSpec("P")
R = TypeVar("R")


def _pack_command(self: Any, *args: Any) -> list[bytes]:
    """redis-py's ``pack_command`` output, built with one join (its own re-copies the growing
    buffer for every argument, which dominates scripts called with hundreds of arguments).

    Bytes, ints and (with the default utf-8/strict encoder) strs are encoded here; anything
    else goes through the connection's encoder, which also raises on what it refuses (bool)."""
    first = args[0]
    if isinstance(first, str):
        args = (*first.encode().split(), *args[1:])
    elif b" " in first:
        args = (*first.split(), *args[1:])
    encoder = self.encoder
    utf8 = encoder.encoding in _UTF8 and encoder.encoding_errors == "strict"
    if utf8 and _hiredis_pack is not None:
        # hiredis writes the same bytes in C for bytes, utf-8 strs, ints and floats (repr, as
        # redis-py's encoder); it refuses anything else (bool too), which the loop below sends
        # through the connection's encoder
        try:
            return [_hiredis_pack(args)]
        except TypeError:
            pass
    encode = encoder.encode
    pieces = [b"*%d\r\n" % len(args)]
    append = pieces.append
    for arg in args:
        kind = type(arg)
        if kind is bytes:
            value = arg
        elif kind is str and utf8:
            value = arg.encode()
        elif kind is int:
            value = b"%d" % arg
        else:
            value = encode(arg)
        append(b"$%d\r\n%b\r\n" % (len(value), value))
    return [b"".join(pieces)]


_UTF8 = frozenset({"utf-8", "utf8", "UTF-8"})

_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:  # redis-py without its hiredis extra: the loop above packs
    _hiredis_pack = None


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


class StaysClosedPool(ConnectionPool):
    """A pool that stays closed once its client closed it: a connection released after that is
    disconnected, not kept.

    redis-py's closed pool is only disconnected: the next command on it connects again, and a
    task that outlived its client's close (a stream not yet ended, a batch still in flight)
    would leave that connection open, to be reported unclosed by the collector whenever it runs
    (DESIGN.md §11). Commands still work; each then closes its connection after use.
    """

    _closed = False

    async def aclose(self) -> None:
        """Close the pool, disconnecting all connections, and keep it closed."""
        self._closed = True
        await super().aclose()

    async def release(self, connection: AbstractConnection) -> None:
        """Back to the pool, disconnected if the pool was closed."""
        await super().release(connection)
        if self._closed:
            await connection.disconnect()


class StaysClosedBlockingPool(StaysClosedPool, BlockingConnectionPool):
    """:class:`StaysClosedPool` whose callers wait for a free connection."""


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


def _cluster(settings: CommonSettings | None) -> bool:
    return settings is not None and settings.redis_cluster


def cluster_client(
    url: str, *, settings: CommonSettings | None, max_connections: int = DEFAULT_MAX_CONNECTIONS
) -> Redis:
    """A Redis Cluster client (``redis.asyncio.cluster.RedisCluster``) seeded from ``url``.

    Typed as :class:`Redis`: the commands agentledger sends (keyed commands, EVALSHA with the
    keys of one slot, pipelines, SCAN, FLUSHALL) have the same signatures on both, and every
    client is built here, so nothing else needs to know. ``max_connections`` is per node (a
    full node raises instead of waiting).
    """
    client = RedisCluster.from_url(
        url,
        **redis_options(settings, url),
        max_connections=max(max_connections, 16),
        socket_connect_timeout=SOCKET_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
    )
    return cast("Redis", client)


def redis_client(url: str, *, settings: CommonSettings | None) -> Redis:
    """A client for ``url`` with the settings' TLS options: a cluster client when
    AGENTLEDGER_REDIS_CLUSTER is true, else a plain one with agentledger's timeouts."""
    if _cluster(settings):
        return cluster_client(url, settings=settings)
    pool = StaysClosedPool.from_url(
        url,
        **redis_options(settings, url),
        **_DRIVER,
        socket_connect_timeout=SOCKET_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
    )
    return fast_packing(Redis.from_pool(pool))


def is_cluster(client: Redis) -> bool:
    """Whether ``client`` is a Redis Cluster client."""
    return isinstance(client, RedisCluster)


async def check_mode(client: Redis, *, endpoint: str) -> None:
    """Connect and check that the server is what AGENTLEDGER_REDIS_CLUSTER says it is.

    A cluster client against a single Redis, or a plain client against a cluster node, fails
    here with one line naming the setting (ConfigurationError); an unreachable server raises
    UnreachableError, a refused login ConfigurationError. Within the connect timeout.
    """
    if is_cluster(client):
        try:
            await cast("RedisCluster", client).initialize()
        except redis.exceptions.RedisClusterException as e:
            if "cluster mode is not enabled" not in str(e).lower():
                cause = e.__cause__ if isinstance(e.__cause__, BaseException) else e
                raise redis_failure(cause, endpoint) from e
            msg = (
                f"Redis at {endpoint} is not a Redis Cluster (cluster mode is not enabled): "
                "set AGENTLEDGER_REDIS_CLUSTER=false for a single Redis"
            )
            raise ConfigurationError(msg) from e
        except CONNECTION_ERRORS as e:
            raise redis_failure(e, endpoint) from e
        return
    try:
        info = await client.info("cluster")
    except CONNECTION_ERRORS as e:
        raise redis_failure(e, endpoint) from e
    if int(info.get("cluster_enabled", 0)) == 1:
        msg = (
            f"Redis at {endpoint} is a Redis Cluster node: set AGENTLEDGER_REDIS_CLUSTER=true "
            "(a plain client would write keys of other nodes' slots)"
        )
        raise ConfigurationError(msg)


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
    (:func:`redis_options`) and, with AGENTLEDGER_REDIS_CLUSTER, a cluster client instead
    (:func:`cluster_client`).
    """
    if _cluster(settings):
        return cluster_client(url, settings=settings, max_connections=max_connections)
    pool = StaysClosedBlockingPool.from_url(
        url,
        **redis_options(settings, url),
        **_DRIVER,
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

    @property
    def outage_budget_s(self) -> float:
        """How long a lost connection is waited out before UnreachableError (0: not at all)."""


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


async def riding_out(call: Callable[[], Awaitable[R]], endpoint: str, budget_s: float) -> R:
    """``await call()`` with connection failures translated (:func:`redis_failure`) and, while
    Redis is unreachable, tried again with backoff up to ``budget_s`` (``call`` must be safe
    to repeat: a read, or a write whose second run changes nothing more)."""

    async def once() -> R:
        try:
            return await call()
        except CONNECTION_ERRORS as e:
            raise redis_failure(e, endpoint) from e

    return await ride_out(once, dependency="Redis", endpoint=endpoint, budget_s=budget_s)


def translated(
    method: Callable[Concatenate[S, P], Awaitable[R]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
    """Wrap an async method so connection-level Redis failures become UnreachableError, after
    waiting the outage out for up to ``self.outage_budget_s`` (the method is called again: it
    must be safe to repeat, as the view store's are: reads, and writes guarded by what was
    applied)."""

    @functools.wraps(method)
    async def guarded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await riding_out(
            lambda: method(self, *args, **kwargs), self.endpoint, self.outage_budget_s
        )

    return guarded


class RedisKeyspace:
    """One Redis client, the prefix of the keys a component keeps there, and how its calls
    ride out a lost connection (named ``endpoint``, for up to ``outage_budget_s``)."""

    def __init__(
        self,
        client: Redis,
        *,
        key_prefix: str,
        endpoint: str = "redis",
        outage_budget_s: float = 0.0,
    ) -> None:
        self._client = client
        self._prefix = key_prefix
        self._endpoint = endpoint
        self._budget_s = outage_budget_s

    async def _guarded(self, call: Callable[[], Awaitable[R]]) -> R:
        """``call()`` (safe to repeat), a lost connection waited out within the budget."""
        return await riding_out(call, self._endpoint, self._budget_s)
