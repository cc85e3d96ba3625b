"""Alert records, delivery marks and the webhook dead letter in Redis.

All alert keys share one hash tag (``{<prefix>:alerts}``) so the multi-key transactions below
also run on Redis Cluster. Records are JSON strings updated with WATCH/MULTI: the transition is
the same pure function the memory store applies.
"""

from __future__ import annotations

from typing import TypeVar

from redis.asyncio import Redis
from redis.exceptions import RedisError, WatchError

from agentledger.alerts.delivery import DeliveryLedger, SinkDeadLetter, UndeliveredAlert
from agentledger.alerts.model import AlertRecord
from agentledger.alerts.store import AlertStore, Transition
from agentledger.errors import UnreachableError

T = TypeVar("T")
_MAX_RETRIES = 100


def client_endpoint(redis: Redis) -> str:
    """Where ``redis`` connects (``host:port``, no password), for error messages."""
    kwargs = getattr(getattr(redis, "connection_pool", None), "connection_kwargs", None) or {}
    host, port = kwargs.get("host"), kwargs.get("port")
    return f"{host}:{port}" if host is not None and port is not None else "redis"


def unreachable(endpoint: str, what: str, error: RedisError | str) -> UnreachableError:
    """The error of a failed alert-store call: Redis at ``endpoint`` is unreachable."""
    return UnreachableError("Redis", endpoint, f"{what}: {error}")


def alerts_tag(key_prefix: str) -> str:
    """The hash-tagged prefix of every alert key under ``key_prefix``."""
    return f"{{{key_prefix}:alerts}}"


class RedisAlertStore(AlertStore):
    """Alert records under ``{<prefix>:alerts}:rec:<condition>``, indexed by key and alert id."""

    def __init__(self, redis: Redis, key_prefix: str, *, endpoint: str | None = None) -> None:
        self._redis = redis
        self._endpoint = endpoint or client_endpoint(redis)
        tag = alerts_tag(key_prefix)
        self._rec = f"{tag}:rec:"
        self._keys = f"{tag}:keys"
        self._ids = f"{tag}:ids"

    async def update(self, key: str, transition: Transition[T]) -> T:
        """Apply ``transition`` under WATCH; retried when another writer got in between."""
        rec_key = self._rec + key
        try:
            for _ in range(_MAX_RETRIES):
                async with self._redis.pipeline(transaction=True) as pipe:
                    try:
                        await pipe.watch(rec_key)
                        raw = await pipe.get(rec_key)
                        existing = None if raw is None else AlertRecord.model_validate_json(raw)
                        new, result = transition(existing)
                        pipe.multi()  # type: ignore[no-untyped-call]  # redis-py lacks a hint
                        if existing is not None and (
                            new is None or new.alert_id != existing.alert_id
                        ):
                            pipe.hdel(self._ids, existing.alert_id)
                        if new is None:
                            pipe.delete(rec_key)
                            pipe.srem(self._keys, key)
                        else:
                            pipe.set(rec_key, new.model_dump_json())
                            pipe.sadd(self._keys, key)
                            pipe.hset(self._ids, new.alert_id, key)
                        await pipe.execute()
                        return result
                    except WatchError:
                        continue
        except RedisError as e:
            raise unreachable(self._endpoint, "alert store", e) from e
        msg = f"alert record {key} kept changing under {_MAX_RETRIES} attempts"
        raise unreachable(self._endpoint, "alert store", msg)

    async def get(self, key: str) -> AlertRecord | None:
        """The record of ``key``, or None."""
        try:
            raw = await self._redis.get(self._rec + key)
        except RedisError as e:
            raise unreachable(self._endpoint, "alert store", e) from e
        return None if raw is None else AlertRecord.model_validate_json(raw)

    async def key_of(self, alert_id: str) -> str | None:
        """The condition key of ``alert_id``."""
        try:
            raw = await self._redis.hget(self._ids, alert_id)
        except RedisError as e:
            raise unreachable(self._endpoint, "alert store", e) from e
        return None if raw is None else _text(raw)

    async def records(self) -> list[AlertRecord]:
        """Every record, read in one round trip after listing the keys."""
        try:
            keys = sorted(_text(k) for k in await self._redis.smembers(self._keys))
            if not keys:
                return []
            raws = await self._redis.mget([self._rec + k for k in keys])
        except RedisError as e:
            raise unreachable(self._endpoint, "alert store", e) from e
        return [AlertRecord.model_validate_json(raw) for raw in raws if raw is not None]


class RedisDeliveryLedger(DeliveryLedger):
    """One key per (sink, event) with a TTL longer than any redelivery of the alerts topic."""

    def __init__(
        self,
        redis: Redis,
        key_prefix: str,
        *,
        ttl_s: int = 30 * 24 * 3600,
        endpoint: str | None = None,
    ) -> None:
        self._redis = redis
        self._endpoint = endpoint or client_endpoint(redis)
        self._prefix = f"{alerts_tag(key_prefix)}:handled:"
        self._ttl_s = ttl_s

    async def claim(self, sink: str, event_id: str, ttl_s: int) -> bool:
        """SET NX with a short TTL: True for exactly one claimer while unhandled."""
        try:
            won = await self._redis.set(
                f"{self._prefix}{sink}:{event_id}", b"claimed", nx=True, ex=max(ttl_s, 1)
            )
        except RedisError as e:
            raise unreachable(self._endpoint, "alert delivery ledger", e) from e
        return bool(won)

    async def mark(self, sink: str, event_id: str) -> None:
        """Replace the claim with a mark that lives as long as the alerts topic keeps events."""
        try:
            await self._redis.set(f"{self._prefix}{sink}:{event_id}", b"done", ex=self._ttl_s)
        except RedisError as e:
            raise unreachable(self._endpoint, "alert delivery ledger", e) from e


class RedisSinkDeadLetter(SinkDeadLetter):
    """A capped Redis list, newest first; the alerts topic keeps every alert regardless."""

    def __init__(
        self, redis: Redis, key_prefix: str, *, cap: int = 10_000, endpoint: str | None = None
    ) -> None:
        self._redis = redis
        self._endpoint = endpoint or client_endpoint(redis)
        self._key = f"{alerts_tag(key_prefix)}:undelivered"
        self._cap = cap

    async def add(self, entry: UndeliveredAlert) -> None:
        """Push and trim to the cap."""
        try:
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.lpush(self._key, entry.model_dump_json())
                pipe.ltrim(self._key, 0, self._cap - 1)
                await pipe.execute()
        except RedisError as e:
            raise unreachable(self._endpoint, "alert dead letter", e) from e

    async def entries(self, limit: int = 100) -> list[UndeliveredAlert]:
        """Newest first."""
        try:
            raws = await self._redis.lrange(self._key, 0, max(limit, 1) - 1)
        except RedisError as e:
            raise unreachable(self._endpoint, "alert dead letter", e) from e
        return [UndeliveredAlert.model_validate_json(raw) for raw in raws]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
