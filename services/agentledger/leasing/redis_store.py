"""Run leases in Redis: atomic Lua scripts on ``<prefix>:{RUN}:lease``, Redis server time."""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import Any, TypeVar

import redis.exceptions
from redis.asyncio import Redis

from agentledger.bus.port import Holder
from agentledger.coalesce import Coalescer
from agentledger.errors import (
    ConfigurationError,
    LeaseHeldError,
    StaleFenceError,
)
from agentledger.leases import Lease, LeaseStore
from agentledger.leasing import scripts
from agentledger.redisclient import is_cluster, redacted, redis_client, riding_out
from agentledger.settings import CommonSettings

T = TypeVar("T")
DEFAULT_RETAIN_MS = 7 * 24 * 3600 * 1000


def lease_key(key_prefix: str, run_id: str) -> str:
    """``<prefix>:{RUN}:lease``: the run id as Redis Cluster hash tag, like every key of the run."""
    return f"{key_prefix}:{{{run_tag(run_id)}}}:lease"


def run_tag(run_id: str) -> str:
    """The run's hash tag: its id, unless braces would cut it short (then a digest of it).

    The same rule as the view keys (agentledger.views.keys), so a run's keys share one slot.
    """
    if "{" in run_id or "}" in run_id or not run_id:
        return "h" + hashlib.sha1(run_id.encode()).hexdigest()[:20]  # noqa: S324 - not security
    return run_id


class RedisLeaseStore(LeaseStore):
    """LeaseStore (and FenceGuard) on Redis; an async context manager when it owns its client.

    Lease hashes live ``retain_ms`` past their last write (default 7 days) so that fences keep
    growing across release and expiry; a run's worker passes ``floor`` anyway, for wiped Redis.

    Every call but the fence check waits a lost connection out for up to ``outage_budget_s``
    (the scripts are safe to run twice: a second acquire by the same owner only bumps the fence
    again). The fence check runs inside an open Kafka transaction, so it fails at once and the
    event log's commit loop does the waiting, with no transaction open.
    """

    def __init__(
        self,
        client: Redis,
        *,
        key_prefix: str = "al",
        retain_ms: int = DEFAULT_RETAIN_MS,
        endpoint: str = "redis",
        owns_client: bool = False,
        outage_budget_s: float = 0.0,
    ) -> None:
        self._client = client
        self._budget_s = outage_budget_s
        self._prefix = key_prefix
        self._retain_ms = retain_ms
        self._endpoint = endpoint
        self._owns_client = owns_client
        self._closed = False
        self._shas: dict[str, str] = {}
        # A cluster spreads the runs' keys over slots: one script cannot read them all.
        self._cluster = is_cluster(client)
        # The acquisitions and releases of runs opened and closed together: one script call
        # for all of them (one Redis), each run's body as it runs alone (DESIGN.md §13).
        self._acquires: Coalescer[tuple[str, tuple[int | str, ...]], Any] = Coalescer(
            partial(self._eval_batch, scripts.ACQUIRE), name="lease-acquires"
        )
        self._releases: Coalescer[tuple[str, tuple[int | str, ...]], Any] = Coalescer(
            partial(self._eval_batch, scripts.RELEASE), name="lease-releases"
        )

    @classmethod
    def from_settings(cls, settings: CommonSettings) -> RedisLeaseStore:
        """A store with its own connection pool to ``settings.redis_url``."""
        if not settings.redis_url:
            msg = (
                "redis_url is not set: resolve the endpoints first "
                "(agentledger.stack.resolve.resolve_settings) or set AGENTLEDGER_REDIS_URL"
            )
            raise ConfigurationError(msg)
        client = redis_client(settings.redis_url, settings=settings)
        return cls(
            client,
            key_prefix=settings.key_prefix,
            endpoint=redacted(settings.redis_url),
            owns_client=True,
            outage_budget_s=settings.outage_budget_s,
        )

    @property
    def endpoint(self) -> str:
        """The Redis URL without its password, as errors name it."""
        return self._endpoint

    async def __aenter__(self) -> RedisLeaseStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Close the connection pool if this store owns it (idempotent)."""
        if self._owns_client and not self._closed:
            self._closed = True
            await self._client.aclose()

    def key(self, run_id: str) -> str:
        """The lease key of a run."""
        return lease_key(self._prefix, run_id)

    # --- the port -------------------------------------------------------------------------

    async def acquire(self, run_id: str, owner: str, ttl_ms: int, *, floor: int = 0) -> Lease:
        """Take the lease if free, expired or ``owner``'s; fence = max(stored, floor) + 1."""
        _check_ttl(ttl_ms)
        call = (self.key(run_id), (owner, ttl_ms, max(floor, 0), self._retain_ms))
        reply = await (
            self._eval(scripts.ACQUIRE, call[0], *call[1])
            if self._cluster
            else self._acquires(call)
        )
        if int(reply[0]) == 1:
            return Lease(run_id, owner, int(reply[1]), int(reply[2]))
        fence, expires, holder, now = int(reply[1]), int(reply[2]), _text(reply[3]), int(reply[4])
        msg = f"held by {holder} (fence {fence}) for {expires - now} ms more"
        raise LeaseHeldError(msg, run_id=run_id)

    async def acquire_many(
        self, floors: Mapping[str, int], owner: str, ttl_ms: int
    ) -> dict[str, Lease | None]:
        """See :meth:`LeaseStore.acquire_many`: one round trip (one script for every run; a
        pipeline of a script per run on a Redis Cluster)."""
        _check_ttl(ttl_ms)
        runs = list(floors)
        replies = await self._eval_many(
            scripts.ACQUIRE,
            [(self.key(r), (owner, ttl_ms, max(floors[r], 0), self._retain_ms)) for r in runs],
        )
        return {
            run_id: Lease(run_id, owner, int(reply[1]), int(reply[2]))
            if int(reply[0]) == 1
            else None
            for run_id, reply in zip(runs, replies, strict=True)
        }

    async def release_many(self, leases: Sequence[Lease]) -> None:
        """See :meth:`LeaseStore.release_many`: one round trip (as :meth:`acquire_many`)."""
        if leases:
            await self._eval_many(
                scripts.RELEASE, [(self.key(x.run_id), (x.owner, x.fence)) for x in leases]
            )

    async def renew(self, lease: Lease, ttl_ms: int) -> Lease:
        """Extend a live lease with the same owner and fence; else StaleFenceError."""
        _check_ttl(ttl_ms)
        reply = await self._eval(
            scripts.RENEW, self.key(lease.run_id), lease.owner, lease.fence, ttl_ms, self._retain_ms
        )
        if int(reply[0]) == 1:
            return Lease(lease.run_id, lease.owner, lease.fence, int(reply[1]))
        fence, holder = int(reply[1]), _text(reply[3]) or "nobody"
        raise StaleFenceError(
            f"lease of {lease.owner} with fence {lease.fence} is lost "
            f"(now {holder}, fence {fence}, expired or released)",
            run_id=lease.run_id,
        )

    async def release(self, lease: Lease) -> None:
        """Free the run if still held with this fence; the fence stays (idempotent)."""
        call = (self.key(lease.run_id), (lease.owner, lease.fence))
        if self._cluster:
            await self._eval(scripts.RELEASE, call[0], *call[1])
        else:
            await self._releases(call)

    async def current(self, run_id: str) -> Lease | None:
        """The live lease of the run, or None."""
        owner, fence, expires, now = await self._eval(scripts.CURRENT, self.key(run_id))
        holder = _text(owner)
        if not holder or int(expires) <= int(now):
            return None
        return Lease(run_id, holder, int(fence), int(expires))

    async def stale(self, claims: dict[str, Holder]) -> set[str]:
        """Runs whose lease is missing, expired or has another fence or owner: one round trip."""
        if not claims:
            return set()
        runs = list(claims)

        async def ask() -> list[Any]:
            sha = await self._sha(scripts.STALE)
            if len(runs) == 1:  # one writer's commit: a plain call costs less than a pipeline
                fence, owner = claims[runs[0]]
                return [await self._client.evalsha(sha, 1, self.key(runs[0]), fence, owner)]
            if not self._cluster:  # one script for every run (a pipeline parses each reply)
                many = await self._sha(scripts.STALE_MANY)
                args = [x for run_id in runs for x in claims[run_id]]
                keys = [self.key(run_id) for run_id in runs]
                replies: list[Any] = await self._client.evalsha(many, len(keys), *keys, *args)
                return replies
            pipe = self._client.pipeline(transaction=False)
            for run_id in runs:
                # cluster pipelines block .evalsha; the raw command is routed by its key
                fence, owner = claims[run_id]
                pipe.execute_command("EVALSHA", sha, 1, self.key(run_id), fence, owner)
            result: list[Any] = await pipe.execute()
            return result

        replies = await self._guarded(ask, budget_s=0.0)
        return {run_id for run_id, flag in zip(runs, replies, strict=True) if int(flag) == 1}

    # --- for tests and operators ----------------------------------------------------------

    async def forget_all(self) -> None:
        """Delete every lease under this prefix, as FLUSHALL would (fences are lost)."""

        async def wipe() -> None:
            keys = [k async for k in self._client.scan_iter(match=f"{self._prefix}:*:lease")]
            if keys:
                await self._client.delete(*keys)

        await self._guarded(wipe)

    # --- internals ------------------------------------------------------------------------

    async def _eval(self, script: str, key: str, *args: int | str) -> list[Any]:
        async def run() -> list[Any]:
            sha = await self._sha(script)
            result: list[Any] = await self._client.evalsha(sha, 1, key, *args)
            return result

        return await self._guarded(run)

    async def _eval_many(
        self, script: str, calls: Sequence[tuple[str, tuple[int | str, ...]]]
    ) -> list[Any]:
        async def run() -> list[Any]:
            if not self._cluster and len(calls) > 1 and len({len(a) for _, a in calls}) == 1:
                # One call for every run (a pipeline's replies are parsed one by one in Python,
                # about 10 µs each): as STALE_MANY does for the fence check.
                many = await self._sha(scripts.for_many(script))
                keys = [key for key, _ in calls]
                flat = [x for _, args in calls for x in args]
                n = len(calls[0][1])
                replies: list[Any] = await self._client.evalsha(many, len(keys), *keys, n, *flat)
                return replies
            sha = await self._sha(script)
            pipe = self._client.pipeline(transaction=False)
            for key, args in calls:
                pipe.execute_command("EVALSHA", sha, 1, key, *args)
            result: list[Any] = await pipe.execute()
            return result

        return await self._guarded(run)

    async def _eval_batch(
        self, script: str, calls: Sequence[tuple[str, tuple[int | str, ...]]]
    ) -> list[Any]:
        """The replies of ``script`` for ``calls`` (a batch of a :class:`Coalescer`): one
        plain call when it is alone, else one call of the script for many."""
        if len(calls) == 1:
            return [await self._eval(script, calls[0][0], *calls[0][1])]
        return await self._eval_many(script, calls)

    async def _sha(self, script: str) -> str:
        """The script's SHA1, computed here: Redis names a script by it, so a first call needs
        no SCRIPT LOAD round trip (a Redis that does not hold it answers NOSCRIPT: reloaded)."""
        sha = self._shas.get(script)
        if sha is None:
            sha = self._shas[script] = script_sha(script)
        return sha

    async def _reload(self) -> None:
        """Load every script this store has called into Redis (each node of a cluster): a
        restarted or flushed Redis holds none of them."""
        for script in list(self._shas):
            await self._client.script_load(script)

    async def _guarded(
        self, call: Callable[[], Awaitable[T]], *, budget_s: float | None = None
    ) -> T:
        """Run ``call``; reload scripts once if Redis forgot them (a restarted Redis has none);
        wait a lost connection out (the store's budget unless ``budget_s``); translate errors."""

        async def once() -> T:
            try:
                return await call()
            except redis.exceptions.NoScriptError:
                await self._reload()
                return await call()

        budget = self._budget_s if budget_s is None else budget_s
        return await riding_out(once, self._endpoint, budget)


def script_sha(script: str) -> str:
    """The SHA1 Redis names ``script`` by (EVALSHA, SCRIPT LOAD's answer)."""
    return hashlib.sha1(script.encode()).hexdigest()  # noqa: S324 - Redis's name, not security


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _check_ttl(ttl_ms: int) -> None:
    if ttl_ms <= 0:
        msg = f"a lease ttl must be positive, got {ttl_ms} ms (check the lease ttl setting)"
        raise ConfigurationError(msg)
