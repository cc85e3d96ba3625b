"""The Redis view store: one Lua script per run write, indexes and progress right after."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from agentledger.errors import UnreachableError, ViewsWipedError
from agentledger.events.codec import EventCodec
from agentledger.events.models import FINISHED_STATUSES, RunEvent, now_ms
from agentledger.events.positions import Position
from agentledger.redisclient import (
    CONNECTION_ERRORS,
    fast_packing,
    redacted,
    redis_failure,
    redis_options,
    tls_hint,
    translated,
)
from agentledger.settings import CommonSettings
from agentledger.views.keys import (
    BORN_FIELD,
    STATUSES,
    Keys,
    parse_progress_field,
    progress_field,
)
from agentledger.views.layout import (
    Token,
    decode_run,
    encode_effect,
    encode_run,
    encode_step,
    token_args,
    token_of,
)
from agentledger.views.redis_replies import pairs, scan_chunks, snapshot_keys, text, texts
from agentledger.views.scripts import LOAD_RUN, REPLACE_LIVE, UPDATE_INDEXES, WRITE_RUN
from agentledger.views.store import (
    IndexUpdate,
    OpenIntent,
    RunWrite,
    SnapshotValue,
    StoredRun,
    TopicPartition,
    ViewStore,
    WriteOutcome,
)
from agentledger.views.support import intent_member, parse_intent_member, retention_ttl

_FIELDS_CACHE = 50_000


class RedisViewStore(ViewStore):
    """Views in Redis under ``<key_prefix>:<namespace>:{RUN}:…`` (see :mod:`.keys`).

    ``retention_ms`` (None = forever) is how long a finished run's keys outlive its end.
    Every Redis call turns a lost, refused or timed-out connection (or a pool with no free
    connection) into :class:`UnreachableError` naming ``url`` with its password redacted.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        key_prefix: str,
        codec: EventCodec | None = None,
        retention_ms: int | None = None,
        owns_client: bool = False,
        url: str = "redis",
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._redis = client
        self._keys = Keys(key_prefix)
        self._codec = codec or EventCodec()
        self._retention_ms = retention_ms
        self._owns = owns_client
        self._url = redacted(url)
        self._shas: dict[str, str] = {}
        self._closed = False
        self._clock = clock
        self._fields: OrderedDict[tuple[str, str], tuple[Token, dict[str, bytes]]] = OrderedDict()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        key_prefix: str,
        codec: EventCodec | None = None,
        retention_ms: int | None = None,
        clock: Callable[[], int] = now_ms,
        settings: CommonSettings | None = None,
    ) -> RedisViewStore:
        """A store owning a new client for ``url`` (closed by :meth:`close`); ``settings`` give
        the TLS options (:func:`~agentledger.redisclient.redis_options`)."""
        client = fast_packing(
            aioredis.Redis.from_url(url, decode_responses=False, **redis_options(settings, url))
        )
        return cls(
            client,
            key_prefix=key_prefix,
            codec=codec,
            retention_ms=retention_ms,
            owns_client=True,
            url=url,
            clock=clock,
        )

    async def __aenter__(self) -> Self:
        try:
            await self._redis.ping()
        except CONNECTION_ERRORS as e:
            await self.close()
            failure = redis_failure(e, self._url)
            if isinstance(failure, UnreachableError):
                hint = "is redis-server running?" + tls_hint(self._url)
                raise UnreachableError("Redis", self._url, hint) from e
            raise failure from e
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the client if this store owns it (idempotent)."""
        if not self._closed and self._owns:
            await self._redis.aclose()
        self._closed = True

    @property
    def keys(self) -> Keys:
        """The key names this store uses."""
        return self._keys

    @property
    def endpoint(self) -> str:
        """The Redis URL without its password, as errors name it."""
        return self._url

    @property
    def client(self) -> aioredis.Redis:
        """The underlying client (benchmarks and operators' tools)."""
        return self._redis

    # --- scripts ------------------------------------------------------------------------

    async def _sha(self, script: str) -> str:
        sha = self._shas.get(script)
        if sha is None:
            sha = str(await self._redis.script_load(script))
            self._shas[script] = sha
        return sha

    async def _run_pipeline(self, calls: list[tuple[str, list[str], list[Any]]]) -> list[Any]:
        """EVALSHA each (script, keys, args) in one pipeline; reload scripts once if flushed."""
        for attempt in (1, 2):
            pipe = self._redis.pipeline(transaction=False)
            for script, keys, args in calls:
                pipe.evalsha(await self._sha(script), len(keys), *keys, *args)
            try:
                return list(await pipe.execute())
            except NoScriptError:
                if attempt == 2:
                    raise
                self._shas.clear()
        return []

    # --- namespaces ---------------------------------------------------------------------

    @translated
    async def live_namespace(self, *, create: bool = False) -> str | None:
        """See :meth:`ViewStore.live_namespace`."""
        raw = await self._redis.get(self._keys.pointer)
        if raw is None and create:
            fresh = await self.create_namespace()
            await self._redis.set(self._keys.pointer, fresh, nx=True)
            raw = await self._redis.get(self._keys.pointer)
        return None if raw is None else text(raw)

    @translated
    async def create_namespace(self) -> str:
        """See :meth:`ViewStore.create_namespace`."""
        name = f"v{secrets.token_hex(4)}"
        await self._redis.hset(self._keys.space(name).progress, BORN_FIELD, self._clock())
        await self._redis.zadd(self._keys.registry, {name: self._clock()})
        return name

    @translated
    async def mark_namespace(self, namespace: str) -> None:
        """See :meth:`ViewStore.mark_namespace`."""
        await self._redis.hsetnx(self._keys.space(namespace).progress, BORN_FIELD, self._clock())

    @translated
    async def is_marked(self, namespace: str) -> bool:
        """See :meth:`ViewStore.is_marked`."""
        return bool(await self._redis.hexists(self._keys.space(namespace).progress, BORN_FIELD))

    @translated
    async def replace_live(self, old: str, fresh: str) -> str:
        """See :meth:`ViewStore.replace_live`."""
        (live,) = await self._run_pipeline([(REPLACE_LIVE, [self._keys.pointer], [old, fresh])])
        return text(live)

    @translated
    async def swap(self, namespace: str) -> str | None:
        """See :meth:`ViewStore.swap`."""
        old = await self._redis.set(self._keys.pointer, namespace, get=True)
        return None if old is None else text(old)

    @translated
    async def drop_namespace(self, namespace: str) -> int:
        """See :meth:`ViewStore.drop_namespace`."""
        if namespace == await self.live_namespace():
            return 0
        deleted = 0
        async for chunk in scan_chunks(self._redis, self._keys.space(namespace).pattern):
            deleted += int(await self._redis.unlink(*chunk))
        await self._redis.zrem(self._keys.registry, namespace)
        return deleted

    @translated
    async def namespaces(self) -> list[str]:
        """See :meth:`ViewStore.namespaces`."""
        return texts(await self._redis.zrange(self._keys.registry, 0, -1))

    # --- runs ---------------------------------------------------------------------------

    @translated
    async def load_runs(self, namespace: str, run_ids: Sequence[str]) -> dict[str, StoredRun]:
        """See :meth:`ViewStore.load_runs` (one script call per run, all pipelined)."""
        space = self._keys.space(namespace)
        raw = await self._run_pipeline([(LOAD_RUN, space.run_keys(r), []) for r in run_ids])
        found: dict[str, StoredRun] = {}
        for run_id, parts in zip(run_ids, raw, strict=True):
            run_hash, steps, effects, parked = (pairs(p) for p in parts)
            token = token_of(run_hash)
            if token is None:
                continue
            events = [self._decode_parked(v) for v in parked.values()]
            found[run_id] = StoredRun(decode_run(run_hash, steps, effects), events, token)
            loaded = {k.decode(): v for k, v in run_hash.items()}
            self._remember((namespace, run_id), token, loaded)
        return found

    def _decode_parked(self, value: bytes) -> RunEvent:
        event = self._codec.decode(value)
        if not isinstance(event, RunEvent):
            msg = f"parked record is a {type(event).__name__}, not a run event"
            raise TypeError(msg)
        return event

    @translated
    async def write_runs(self, namespace: str, writes: Sequence[RunWrite]) -> WriteOutcome:
        """See :meth:`ViewStore.write_runs`.

        Run-hash fields unchanged since this store last wrote (or read) the run at the same
        token are not sent again: equal tokens mean the same applied events, hence equal fields.
        """
        space = self._keys.space(namespace)
        now = self._clock()
        calls = []
        fresh: list[dict[str, bytes]] = []
        for w in writes:
            fields = encode_run(w.view, len(w.parked))
            fresh.append(fields)
            known = self._fields.get((namespace, w.run_id))
            sent = fields
            if known is not None and w.expected is not None and known[0] == w.expected:
                sent = {k: v for k, v in fields.items() if known[1].get(k) != v}
            calls.append((WRITE_RUN, space.run_keys(w.run_id), self._write_args(w, sent, now)))
        outcome = WriteOutcome()
        results = await self._run_pipeline(calls)
        for write, fields, result in zip(writes, fresh, results, strict=True):
            cache_key = (namespace, write.run_id)
            self._fields.pop(cache_key, None)
            if result == 0:
                outcome.conflicts.add(write.run_id)
            elif result == 2:
                outcome.expired.add(write.run_id)
            else:
                self._remember(cache_key, (write.view.applied_seq, len(write.parked)), fields)
        return outcome

    def _remember(self, key: tuple[str, str], token: Token, fields: dict[str, bytes]) -> None:
        self._fields[key] = (token, fields)
        while len(self._fields) > _FIELDS_CACHE:
            self._fields.popitem(last=False)

    def _write_args(self, write: RunWrite, run_fields: dict[str, bytes], now: int) -> list[Any]:
        view = write.view
        ttl = retention_ttl(view, self._retention_ms, now)
        steps = {str(i): encode_step(view.steps[i]) for i in sorted(write.steps) if i in view.steps}
        effects = {
            k: encode_effect(view.effects[k]) for k in sorted(write.effects) if k in view.effects
        }
        parked = (
            {e.event_id: self._codec.encode(e) for e in write.parked}
            if write.parked_changed
            else {}
        )
        expected_applied, expected_parked = token_args(write.expected)
        args: list[Any] = [
            expected_applied,
            expected_parked,
            "" if ttl is None else str(ttl),
            len(run_fields),
            len(steps),
            len(effects),
            "1" if write.parked_changed else "0",
            len(parked),
        ]
        for mapping in (run_fields, steps, effects, parked):
            for name, value in mapping.items():
                args.extend((name, value))
        return args

    # --- indexes and progress -----------------------------------------------------------

    @translated
    async def update_indexes(
        self,
        namespace: str,
        updates: Sequence[IndexUpdate],
        progress: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """See :meth:`ViewStore.update_indexes` (one script: indexes and progress share a slot)."""
        if not updates and not progress:
            return
        space = self._keys.space(namespace)
        position = {status: n for n, status in enumerate(STATUSES, start=1)}
        keys = [space.status_index(s) for s in STATUSES]
        keys += [space.intents_index, space.parked_index, space.progress]
        args: list[Any] = [self._clock(), len(progress or {})]
        for (topic, partition), offset in sorted((progress or {}).items()):
            args += [progress_field(topic, partition), offset]
        for u in updates:
            drops = STATUSES if u.status is None else u.drop_statuses
            dropped = [position[s] for s in drops if s != u.status and s in position]
            status = "" if u.status is None else position.get(u.status)
            if status is None:
                msg = f"run {u.run_id}: status {u.status!r} is not one of {STATUSES}"
                raise ValueError(msg)
            args += [u.run_id, status, u.updated_at, len(dropped), *dropped]
            args.append(len(u.open_intents))
            for key, at in u.open_intents.items():
                args += [intent_member(u.run_id, key), at]
            args.append(len(u.closed_intents))
            args += [intent_member(u.run_id, k) for k in sorted(u.closed_intents)]
            args.append("1" if u.parked else "0")
        (done,) = await self._run_pipeline([(UPDATE_INDEXES, keys, args)])
        if done == 0:
            msg = f"the progress of namespace {namespace} vanished (Redis wiped?)"
            raise ViewsWipedError(msg, namespace=namespace)

    @translated
    async def record_progress(self, namespace: str, offsets: Mapping[TopicPartition, int]) -> None:
        """See :meth:`ViewStore.record_progress`."""
        await self.update_indexes(namespace, [], offsets)

    @translated
    async def read_progress(self, namespace: str) -> dict[TopicPartition, int]:
        """See :meth:`ViewStore.read_progress`."""
        raw = await self._redis.hgetall(self._keys.space(namespace).progress)
        return {
            parse_progress_field(text(k)): int(v) for k, v in raw.items() if text(k) != BORN_FIELD
        }

    @translated
    async def overdue_parked(self, namespace: str, parked_before: int) -> list[str]:
        """See :meth:`ViewStore.overdue_parked`."""
        key = self._keys.space(namespace).parked_index
        return texts(await self._redis.zrangebyscore(key, "-inf", f"({parked_before}"))

    @translated
    async def drop_finished_before(self, namespace: str, before: int) -> int:
        """See :meth:`ViewStore.drop_finished_before`."""
        space = self._keys.space(namespace)
        pipe = self._redis.pipeline(transaction=True)
        for status in sorted(FINISHED_STATUSES):
            pipe.zremrangebyscore(space.status_index(status), "-inf", f"({before}")
        return sum(int(n) for n in await pipe.execute())

    @translated
    async def prune(self, namespace: str) -> int:
        """See :meth:`ViewStore.prune`."""
        space = self._keys.space(namespace)
        members: set[str] = set()
        for status in STATUSES:
            members.update(texts(await self._redis.zrange(space.status_index(status), 0, -1)))
        intents = texts(await self._redis.zrange(space.intents_index, 0, -1))
        members.update(parse_intent_member(m)[0] for m in intents)
        ordered = sorted(members)
        pipe = self._redis.pipeline(transaction=False)
        for run_id in ordered:
            pipe.exists(space.run(run_id))
        gone = [r for r, exists in zip(ordered, await pipe.execute(), strict=True) if not exists]
        if gone:
            gone_set = set(gone)
            closed = [m for m in intents if parse_intent_member(m)[0] in gone_set]
            await self.update_indexes(
                namespace,
                [IndexUpdate(run_id=r, status=None) for r in gone],
            )
            if closed:
                await self._redis.zrem(space.intents_index, *closed)
        return len(gone)

    # --- verify -------------------------------------------------------------------------

    @translated
    async def snapshot(self, namespace: str) -> dict[str, SnapshotValue]:
        """See :meth:`ViewStore.snapshot`."""
        space = self._keys.space(namespace)
        result: dict[str, SnapshotValue] = {}
        async for chunk in scan_chunks(self._redis, space.pattern):
            names = [k.decode() for k in chunk if k.decode() != space.progress]
            result.update(await snapshot_keys(self._redis, space, names))
        return result

    # --- read side ----------------------------------------------------------------------

    @translated
    async def progress(self, positions: list[Position]) -> bool:
        """See :meth:`ViewReader.progress`."""
        wanted = [p for p in positions if p.offset > 0]
        if not wanted:
            return True
        namespace = await self.live_namespace()
        if namespace is None:
            return False
        fields = [progress_field(p.topic, p.partition) for p in wanted]
        raw = await self._redis.hmget(self._keys.space(namespace).progress, fields)
        return all(v is not None and int(v) >= p.offset for p, v in zip(wanted, raw, strict=True))

    @translated
    async def runs_by_status(self, status: str, limit: int = 1000) -> list[str]:
        """See :meth:`ViewReader.runs_by_status` (least recently updated first)."""
        namespace = await self.live_namespace()
        if namespace is None or limit <= 0:
            return []
        key = self._keys.space(namespace).status_index(status)
        return texts(await self._redis.zrange(key, 0, limit - 1))

    @translated
    async def open_intents(
        self, older_than: int | None = None, limit: int = 1000
    ) -> list[OpenIntent]:
        """See :meth:`ViewReader.open_intents`."""
        namespace = await self.live_namespace()
        if namespace is None or limit <= 0:
            return []
        key = self._keys.space(namespace).intents_index
        top = "+inf" if older_than is None else f"({older_than}"
        raw: list[Any] = list(
            await self._redis.zrangebyscore(key, "-inf", top, start=0, num=limit, withscores=True)
        )
        found = []
        for member, score in raw:
            run_id, idem = parse_intent_member(text(member))
            found.append(OpenIntent(run_id=run_id, idempotency_key=idem, intended_at=int(score)))
        return found
