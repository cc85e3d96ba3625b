"""The Redis view store: a projector batch is one Lua script per slot group (views, indexes and
progress together); single Redis has one group, Redis Cluster one per run-topic partition."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

import redis.asyncio as aioredis
from redis.exceptions import NoScriptError

from agentledger.errors import (
    UnreachableError,
    ViewsRegressedError,
    ViewsWipedError,
)
from agentledger.events.codec import EventCodec
from agentledger.events.models import FINISHED_STATUSES, RunEvent, now_ms
from agentledger.events.positions import Position
from agentledger.outage import ride_out
from agentledger.redisclient import (
    check_mode,
    is_cluster,
    redacted,
    redis_client,
    tls_hint,
    translated,
)
from agentledger.settings import CommonSettings
from agentledger.views.fresh_commands import fresh_commands, plain_commands_ok, send_packed
from agentledger.views.keys import (
    BORN_FIELD,
    RUN_PARTS,
    STATUSES,
    Group,
    Keys,
    SpaceKeys,
    parse_progress_field,
    progress_field,
    sharded_name,
)
from agentledger.views.layout import (
    DROPPED_FIELD,
    PARKED_FIELD,
    Token,
    decode_run,
    dropped_of,
    encode_effect,
    encode_run,
    encode_step,
    token_args,
    token_for,
    token_of,
)
from agentledger.views.redis_fresh import WRITE_FRESH, fresh_calls, stored_calls
from agentledger.views.redis_replies import pairs, scan_chunks, snapshot_keys, text, texts
from agentledger.views.scripts import (
    COMMIT,
    LOAD_BRIEF_RUNS,
    LOAD_RUN,
    LOAD_RUNS,
    REPLACE_LIVE,
    UPDATE_INDEXES,
    WRITE_RUN,
)
from agentledger.views.store import (
    FreshRun,
    IndexUpdate,
    OpenIntent,
    RunWrite,
    SnapshotValue,
    StoredRun,
    TopicPartition,
    ViewAt,
    ViewStore,
    WriteOutcome,
)
from agentledger.views.support import intent_member, parse_intent_member, retention_ttl

_FIELDS_CACHE = 50_000
_POSITION = {status: n for n, status in enumerate(STATUSES, start=1)}
#: One script call: (script, keys, args).
Call = tuple[str, list[str], list[Any]]


class RedisViewStore(ViewStore):
    """Views in Redis under ``<key_prefix>:<namespace>:{RUN}:…`` (see :mod:`.keys`).

    ``retention_ms`` (None = forever) is how long a finished run's keys outlive its end.
    Namespaces it creates are sharded over ``partitions`` (the run topics' partition count)
    when ``sharded`` (default: the client is a Redis Cluster client); it reads and writes
    namespaces of either layout. A rebuild's writes go as plain commands when
    ``plain_commands`` (default: when the client allows it, see
    :func:`.fresh_commands.plain_commands_ok`), else as WRITE_FRESH scripts. Every Redis call
    turns a lost, refused or timed-out connection (or a pool with no free connection) into
    :class:`UnreachableError` naming ``url`` with its password redacted.
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
        partitions: int | None = None,
        sharded: bool | None = None,
        outage_budget_s: float = 0.0,
        plain_commands: bool | None = None,
    ) -> None:
        self._redis = client
        self._budget_s = outage_budget_s
        self._sharded = is_cluster(client) if sharded is None else sharded
        self._partitions = partitions
        self._keys = Keys(key_prefix)
        self._codec = codec or EventCodec()
        self._retention_ms = retention_ms
        self._owns = owns_client
        self._url = redacted(url)
        self._shas: dict[str, str] = {}
        self._closed = False
        self._clock = clock
        self._fields: OrderedDict[tuple[str, str], tuple[Token, dict[str, bytes]]] = OrderedDict()
        #: a rebuild's writes go as plain commands (views/fresh_commands.py) on one Redis
        #: whose client reads with hiredis; a cluster's take WRITE_FRESH, routed by its keys
        self._plain_commands = (
            plain_commands_ok(client) if plain_commands is None else plain_commands
        )
        #: The live namespace as last seen on this Redis (a read of the pointer here, the check
        #: that ends a view read, or a run-index claim reading the pointer along): a view read
        #: starts from it instead of reading the pointer first, and its check says whether it
        #: was still live (None: not seen, the pointer is read first).
        self._seen: str | None = None

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
        outage_budget_s: float = 0.0,
    ) -> RedisViewStore:
        """A store owning a new client for ``url`` (closed by :meth:`close`); ``settings`` give
        the TLS options (:func:`~agentledger.redisclient.redis_options`), whether Redis is a
        cluster (then namespaces are sharded over ``settings.run_partitions``)."""
        client = redis_client(url, settings=settings)
        return cls(
            client,
            key_prefix=key_prefix,
            codec=codec,
            retention_ms=retention_ms,
            owns_client=True,
            url=url,
            clock=clock,
            partitions=None if settings is None else settings.run_partitions,
            outage_budget_s=outage_budget_s,
        )

    async def __aenter__(self) -> Self:
        try:
            await ride_out(
                lambda: check_mode(self._redis, endpoint=self._url),
                dependency="Redis",
                endpoint=self._url,
                budget_s=self._budget_s,
            )
        except UnreachableError as e:
            await self.close()
            if e.waited_s is None:
                hint = "is redis-server running?" + tls_hint(self._url)
                raise UnreachableError("Redis", self._url, hint) from e
            raise
        except BaseException:
            await self.close()
            raise
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
    def outage_budget_s(self) -> float:
        """How long a call waits out a lost connection before UnreachableError."""
        return self._budget_s

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

    async def _run_pipeline(self, calls: list[Call]) -> list[Any]:
        """EVALSHA each (script, keys, args) in one pipeline; reload scripts once if flushed."""
        for attempt in (1, 2):
            pipe = self._redis.pipeline(transaction=False)
            for script, keys, args in calls:
                # cluster pipelines block .evalsha; the raw command is routed by its key
                pipe.execute_command("EVALSHA", await self._sha(script), len(keys), *keys, *args)
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
        self.saw_pointer(raw)
        return None if raw is None else text(raw)

    @property
    def pointer_key(self) -> str:
        """The key naming the live namespace (a run-index claim on this Redis may read it along:
        :meth:`saw_pointer`)."""
        return self._keys.pointer

    def saw_pointer(self, raw: bytes | str | None) -> None:
        """The pointer's value as read just now on this Redis (None: absent). The next view
        read starts from the namespace it names, and checks that it is still live."""
        self._seen = None if raw is None else text(raw)

    @translated
    async def create_namespace(self) -> str:
        """See :meth:`ViewStore.create_namespace`."""
        name = f"v{secrets.token_hex(4)}"
        if self._sharded:
            if not self._partitions:
                msg = "a sharded view store needs the run topics' partition count to create views"
                raise ValueError(msg)
            name = sharded_name(name, self._partitions)
        space = self._keys.space(name)
        pipe = self._redis.pipeline(transaction=False)
        for group in space.groups:
            pipe.hset(space.progress(group), BORN_FIELD, self._clock())
        await pipe.execute()
        await self._redis.zadd(self._keys.registry, {name: self._clock()})
        return name

    @translated
    async def mark_namespace(self, namespace: str) -> None:
        """See :meth:`ViewStore.mark_namespace`."""
        space = self._keys.space(namespace)
        pipe = self._redis.pipeline(transaction=False)
        for group in space.groups:
            pipe.hsetnx(space.progress(group), BORN_FIELD, self._clock())
        await pipe.execute()

    @translated
    async def is_marked(self, namespace: str) -> bool:
        """See :meth:`ViewStore.is_marked`."""
        space = self._keys.space(namespace)
        pipe = self._redis.pipeline(transaction=False)
        for group in space.groups:
            pipe.hexists(space.progress(group), BORN_FIELD)
        return all(bool(x) for x in await pipe.execute())

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
    async def load_runs(
        self, namespace: str, run_ids: Sequence[str], *, only: Collection[str] | None = None
    ) -> dict[str, StoredRun]:
        """See :meth:`ViewStore.load_runs`: the runs' four hashes in one MULTI/EXEC (a script
        per run, pipelined, on a Redis Cluster, whose transactions cannot span slots).

        A brief read (``only``) decodes those run fields and the effects, and is not kept in
        the cache of run fields a writer compares against (it is no base for a write); on one
        Redis it reads only those fields (and the token's) and no steps (:meth:`_load_brief`)."""
        space = self._keys.space(namespace)
        found: dict[str, StoredRun] = {}
        if only is not None and run_ids and not is_cluster(self._redis):
            hashes = await self._load_brief(space, run_ids, only)
        else:
            hashes = await self._load_hashes(space, run_ids)
        for run_id, parts in zip(run_ids, hashes, strict=True):
            run_hash, steps, effects, parked = parts
            token = token_of(run_hash)
            if token is None:
                continue
            events = [self._decode_parked(v) for v in parked.values()]
            if only is not None:
                view = decode_run(run_hash, {}, effects, only=only)
                found[run_id] = StoredRun(view, events, token, dropped_of(run_hash))
                continue
            found[run_id] = StoredRun(
                decode_run(run_hash, steps, effects), events, token, dropped_of(run_hash)
            )
            loaded = {k.decode(): v for k, v in run_hash.items()}
            self._remember((namespace, run_id), token, loaded)
        return found

    async def _load_hashes(
        self, space: SpaceKeys, run_ids: Sequence[str]
    ) -> list[list[dict[bytes, bytes]]]:
        """The run, steps, effects and parked hashes of each run, each run's read atomically.

        HGETALL inside MULTI/EXEC is read as the script reads it (no write of the projector
        falls between the four), without copying a 1,000-step view through Lua tables first:
        half the server's time for a large view. Several runs (the reconciler's claimed batch,
        the projector's uncached runs) are read by one script instead: redis-py parses each
        reply of a MULTI/EXEC in Python (about 70 µs of client CPU per run of four hashes, 11
        µs for one script's single reply); the one script is atomic as a whole.
        """
        if is_cluster(self._redis):
            raw = await self._run_pipeline([(LOAD_RUN, space.run_keys(r), []) for r in run_ids])
            return [[pairs(p) for p in parts] for parts in raw]
        if not run_ids:
            return []
        n = len(RUN_PARTS)
        if len(run_ids) > 1:
            keys = [key for run_id in run_ids for key in space.run_keys(run_id)]
            [flat] = await self._run_pipeline([(LOAD_RUNS, keys, [])])
            hashes = [pairs(h) for h in flat]
            return [hashes[i : i + n] for i in range(0, len(hashes), n)]
        pipe = self._redis.pipeline(transaction=True)
        for run_id in run_ids:
            for key in space.run_keys(run_id):
                pipe.hgetall(key)
        replies = list(await pipe.execute())
        return [replies[i : i + n] for i in range(0, len(replies), n)]

    async def _load_brief(
        self, space: SpaceKeys, run_ids: Sequence[str], only: Collection[str]
    ) -> list[list[dict[bytes, bytes]]]:
        """As :meth:`_load_hashes` (one script, atomic as a whole), but of each run hash only
        the fields ``only`` names and those its token and dropped seq are read from, and no
        steps (an empty dict in their place): what a brief view is decoded from."""
        names = [*dict.fromkeys([*only, "applied_seq", PARKED_FIELD, DROPPED_FIELD])]
        wanted = [name.encode() for name in names]
        keys = []
        for run_id in run_ids:
            run, _, effects, parked = space.run_keys(run_id)
            keys += [run, effects, parked]
        [replies] = await self._run_pipeline([(LOAD_BRIEF_RUNS, keys, names)])
        loaded: list[list[dict[bytes, bytes]]] = []
        for reply in replies:
            if not reply:  # no run hash: the run is not in the views
                loaded.append([{}, {}, {}, {}])
                continue
            values, effects, parked = reply
            run_hash = {n: v for n, v in zip(wanted, values, strict=True) if v is not None}
            loaded.append([run_hash, {}, pairs(effects), pairs(parked)])
        return loaded

    def _decode_parked(self, value: bytes) -> RunEvent:
        event = self._codec.decode(value)
        if not isinstance(event, RunEvent):
            msg = f"parked record is a {type(event).__name__}, not a run event"
            raise TypeError(msg)
        return event

    @translated
    async def write_runs(self, namespace: str, writes: Sequence[RunWrite]) -> WriteOutcome:
        """See :meth:`ViewStore.write_runs` (one script per run, all pipelined)."""
        space = self._keys.space(namespace)
        now = self._clock()
        prepared = [self._prepare(namespace, w, now) for w in writes]
        calls: list[Call] = [
            (WRITE_RUN, space.run_keys(w.run_id), args)
            for w, (_, args, _) in zip(writes, prepared, strict=True)
        ]
        outcome = WriteOutcome()
        results = await self._run_pipeline(calls)
        for write, (fields, _, _), result in zip(writes, prepared, results, strict=True):
            if result == 0:
                outcome.conflicts.add(write.run_id)
            elif result == 2:
                outcome.expired.add(write.run_id)
            self._settle(namespace, write, fields, written=result == 1)
        return outcome

    @translated
    async def write_fresh(
        self, namespace: str, writes: Sequence[RunWrite], updates: Mapping[str, IndexUpdate]
    ) -> WriteOutcome:
        """See :meth:`ViewStore.write_fresh`: one WRITE_FRESH script per slot group, pipelined
        (see :mod:`.redis_fresh`); no token is compared and the field cache is left alone."""
        calls, expired = fresh_calls(
            self._keys.space(namespace),
            writes,
            updates,
            codec=self._codec,
            retention_ms=self._retention_ms,
            now=self._clock(),
        )
        if calls:
            await self._run_pipeline([(WRITE_FRESH, keys, args) for keys, args in calls])
        outcome = WriteOutcome()
        outcome.expired = expired
        return outcome

    @translated
    async def write_fresh_stored(self, namespace: str, runs: Sequence[FreshRun]) -> WriteOutcome:
        """See :meth:`ViewStore.write_fresh_stored`: the runs' bytes as they are, one
        WRITE_FRESH script per slot group, pipelined (see :mod:`.redis_fresh`)."""
        space = self._keys.space(namespace)
        outcome = WriteOutcome()
        if self._plain_commands:
            packed = fresh_commands(
                space, runs, codec=self._codec, retention_ms=self._retention_ms, now=self._clock()
            )
            if packed.replies:
                await send_packed(self._redis, packed.payload, packed.replies)
            outcome.expired = packed.expired
            return outcome
        calls, expired = stored_calls(
            space, runs, codec=self._codec, retention_ms=self._retention_ms, now=self._clock()
        )
        if calls:
            await self._run_pipeline([(WRITE_FRESH, keys, args) for keys, args in calls])
        outcome.expired = expired
        return outcome

    def _prepare(
        self, namespace: str, w: RunWrite, now: int
    ) -> tuple[dict[str, bytes], list[Any], bool]:
        """The run's fresh fields, its WRITE_RUN arguments, and whether it is past retention.

        Run-hash fields unchanged since this store last wrote (or read) the run at the same
        token are not sent again: equal tokens mean the same applied events, hence equal fields.
        """
        fields = encode_run(w.view, len(w.parked), w.dropped_from)
        known = self._fields.get((namespace, w.run_id))
        sent = fields
        if known is not None and w.expected is not None and known[0] == w.expected:
            sent = {k: v for k, v in fields.items() if known[1].get(k) != v}
        ttl = retention_ttl(w.view, self._retention_ms, now)
        return fields, self._write_args(w, sent, ttl), ttl is not None and ttl <= 0

    def _settle(
        self, namespace: str, w: RunWrite, fields: dict[str, bytes], *, written: bool
    ) -> None:
        cache_key = (namespace, w.run_id)
        self._fields.pop(cache_key, None)
        if written:
            self._remember(
                cache_key, token_for(w.view.applied_seq, len(w.parked), w.dropped_from), fields
            )

    def _remember(self, key: tuple[str, str], token: Token, fields: dict[str, bytes]) -> None:
        self._fields[key] = (token, fields)
        while len(self._fields) > _FIELDS_CACHE:
            self._fields.popitem(last=False)

    def _write_args(
        self, write: RunWrite, run_fields: dict[str, bytes], ttl: int | None
    ) -> list[Any]:
        view = write.view
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

    @staticmethod
    def _index_keys(space: SpaceKeys, group: Group) -> list[str]:
        keys = [space.status_index(s, group) for s in STATUSES]
        return [*keys, space.intents_index(group), space.parked_index(group), space.progress(group)]

    @staticmethod
    def _index_args(u: IndexUpdate) -> list[Any]:
        drops = STATUSES if u.status is None else u.drop_statuses
        dropped = [_POSITION[s] for s in drops if s != u.status and s in _POSITION]
        status = "" if u.status is None else _POSITION.get(u.status)
        if status is None:
            msg = f"run {u.run_id}: status {u.status!r} is not one of {STATUSES}"
            raise ValueError(msg)
        args: list[Any] = [u.run_id, status, u.updated_at, len(dropped), *dropped]
        args.append(len(u.open_intents))
        for key, at in u.open_intents.items():
            args += [intent_member(u.run_id, key), at]
        args.append(len(u.closed_intents))
        args += [intent_member(u.run_id, k) for k in sorted(u.closed_intents)]
        args.append("1" if u.parked else "0")
        return args

    @staticmethod
    def _progress_by_group(
        space: SpaceKeys, progress: Mapping[TopicPartition, int] | None
    ) -> dict[Group, list[tuple[str, int]]]:
        found: dict[Group, list[tuple[str, int]]] = {}
        for (topic, partition), offset in sorted((progress or {}).items()):
            group = space.group_of_partition(partition)
            found.setdefault(group, []).append((progress_field(topic, partition), offset))
        return found

    @translated
    async def update_indexes(
        self,
        namespace: str,
        updates: Sequence[IndexUpdate],
        progress: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """See :meth:`ViewStore.update_indexes` (one script per slot group: a group's indexes
        and progress share its slot)."""
        if not updates and not progress:
            return
        space = self._keys.space(namespace)
        by_group: dict[Group, list[IndexUpdate]] = {}
        for u in updates:
            by_group.setdefault(space.group_of(u.run_id), []).append(u)
        fields = self._progress_by_group(space, progress)
        calls: list[Call] = []
        for group in sorted(set(by_group) | set(fields), key=_group_order):
            pairs_ = fields.get(group, [])
            args: list[Any] = [self._clock(), len(pairs_)]
            for name, offset in pairs_:
                args += [name, offset]
            for u in by_group.get(group, []):
                args += self._index_args(u)
            calls.append((UPDATE_INDEXES, self._index_keys(space, group), args))
        if any(done == 0 for done in await self._run_pipeline(calls)):
            msg = f"the progress of namespace {namespace} vanished (Redis wiped?)"
            raise ViewsWipedError(msg, namespace=namespace)

    def commit_calls(
        self,
        namespace: str,
        writes: Sequence[RunWrite],
        updates: Sequence[IndexUpdate],
        progress: Mapping[TopicPartition, int],
        floors: Mapping[TopicPartition, int] | None = None,
    ) -> list[tuple[Call, list[RunWrite], list[str], list[dict[str, bytes]]]]:
        """The COMMIT calls of a batch, one per slot group: (call, its writes, every run it
        covers, the writes' fresh fields). Pure but for the field cache it reads."""
        space = self._keys.space(namespace)
        now = self._clock()
        writes_by: dict[Group, list[RunWrite]] = {}
        for w in writes:
            writes_by.setdefault(space.group_of(w.run_id), []).append(w)
        updates_by: dict[Group, dict[str, IndexUpdate]] = {}
        for u in updates:
            updates_by.setdefault(space.group_of(u.run_id), {})[u.run_id] = u
        fields = self._progress_by_group(space, progress)
        floor_of = {progress_field(t, p): f for (t, p), f in (floors or {}).items()}
        for topic, partition in floors or {}:
            name = progress_field(topic, partition)
            group = space.group_of_partition(partition)
            if name not in {n for n, _ in fields.get(group, [])}:
                fields.setdefault(group, []).append((name, -1))
        calls = []
        groups = set(writes_by) | set(updates_by) | set(fields)
        for group in sorted(groups, key=_group_order):
            keys: list[str] = []
            group_writes = writes_by.get(group, [])
            group_updates = dict(updates_by.get(group, {}))
            pairs_ = fields.get(group, [])
            args: list[Any] = [now, len(group_writes), len(pairs_)]
            for name, offset in pairs_:
                args += [name, max(offset, 0), floor_of.get(name, "")]
            fresh = []
            for w in group_writes:
                run_fields, write_args, expired = self._prepare(namespace, w, now)
                # what the run hash holds is unknown until the reply (a later plan, made while
                # this one is in flight, must not diff against the fields before it)
                self._fields.pop((namespace, w.run_id), None)
                fresh.append(run_fields)
                keys += space.run_keys(w.run_id)
                args += write_args
                if expired:
                    group_updates[w.run_id] = IndexUpdate(
                        run_id=w.run_id, status=None, closed_intents=frozenset(w.view.effects)
                    )
            for u in group_updates.values():
                args += self._index_args(u)
            keys += self._index_keys(space, group)
            covered = sorted({w.run_id for w in group_writes} | set(group_updates))
            calls.append(((COMMIT, keys, args), group_writes, covered, fresh))
        return calls

    async def commit(
        self,
        namespace: str,
        writes: Sequence[RunWrite],
        updates: Sequence[IndexUpdate],
        progress: Mapping[TopicPartition, int],
        floors: Mapping[TopicPartition, int] | None = None,
    ) -> WriteOutcome:
        """See :meth:`ViewStore.commit`: one COMMIT script per slot group, all pipelined (one
        round trip; on single Redis a plain namespace is one group, hence one script)."""
        return await self.plan_commit(namespace, writes, updates, progress, floors)()

    def plan_commit(
        self,
        namespace: str,
        writes: Sequence[RunWrite],
        updates: Sequence[IndexUpdate],
        progress: Mapping[TopicPartition, int],
        floors: Mapping[TopicPartition, int] | None = None,
    ) -> Callable[[], Awaitable[WriteOutcome]]:
        """See :meth:`ViewStore.plan_commit`: the COMMIT calls are encoded now, sent by the call
        (the runs it writes are encoded in full, never as a diff against an earlier write that
        may still be in flight)."""
        planned = self.commit_calls(namespace, writes, updates, progress, floors)

        async def send() -> WriteOutcome:
            return await self._send_commit(namespace, planned)

        return send

    @translated
    async def _send_commit(
        self,
        namespace: str,
        planned: list[tuple[Call, list[RunWrite], list[str], list[dict[str, bytes]]]],
    ) -> WriteOutcome:
        """Send planned COMMIT calls in one pipeline; read the replies into an outcome."""
        outcome = WriteOutcome()
        if not planned:
            return outcome
        results = await self._run_pipeline([call for call, _, _, _ in planned])
        wiped = regressed = None
        for (_, group_writes, covered, fresh), reply in zip(planned, results, strict=True):
            code = int(reply[0])
            numbers = {int(n) for n in reply[1:]} if code in (0, 1) else set()
            if code == -1:
                wiped = namespace
            elif code == -2:
                regressed = text(reply[1])
            if code != 1:
                outcome.unwritten.update(covered)
            for n, (w, run_fields) in enumerate(zip(group_writes, fresh, strict=True), start=1):
                if code == 0 and n in numbers:
                    outcome.conflicts.add(w.run_id)
                if code == 1 and n in numbers:
                    outcome.expired.add(w.run_id)
                self._settle(namespace, w, run_fields, written=code == 1 and n not in numbers)
        if wiped is not None:
            msg = f"the progress of namespace {namespace} vanished (Redis wiped?)"
            raise ViewsWipedError(msg, namespace=namespace)
        if regressed is not None:
            msg = (
                f"progress {regressed} of namespace {namespace} is below what was stored before "
                "(a Redis failover lost writes): re-applying from the stored progress"
            )
            raise ViewsRegressedError(msg, namespace=namespace, field=regressed)
        return outcome

    @translated
    async def record_progress(
        self,
        namespace: str,
        offsets: Mapping[TopicPartition, int],
        floors: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """See :meth:`ViewStore.record_progress`."""
        if offsets or floors:
            await self.commit(namespace, [], [], offsets, floors)

    async def _each_group(
        self, space: SpaceKeys, command: Callable[[Any, Group], Any]
    ) -> list[Any]:
        """``command(pipe, group)`` for every group of ``space``, in one pipeline."""
        pipe = self._redis.pipeline(transaction=False)
        for group in space.groups:
            command(pipe, group)
        return list(await pipe.execute())

    @translated
    async def read_progress(self, namespace: str) -> dict[TopicPartition, int]:
        """See :meth:`ViewStore.read_progress`."""
        space = self._keys.space(namespace)
        return _progress_of(
            await self._each_group(space, lambda p, g: p.hgetall(space.progress(g)))
        )

    @translated
    async def overdue_parked(self, namespace: str, parked_before: int) -> list[str]:
        """See :meth:`ViewStore.overdue_parked`."""
        space = self._keys.space(namespace)
        replies = await self._each_group(
            space,
            lambda p, g: p.zrangebyscore(
                space.parked_index(g), "-inf", f"({parked_before}", withscores=True
            ),
        )
        return [text(m) for m, _ in _merged(replies)]

    @translated
    async def count_parked(self, namespace: str) -> int:
        """See :meth:`ViewStore.count_parked` (ZCARD of each group's parked index)."""
        space = self._keys.space(namespace)
        replies = await self._each_group(space, lambda p, g: p.zcard(space.parked_index(g)))
        return sum(int(n) for n in replies)

    @translated
    async def drop_finished_before(self, namespace: str, before: int) -> int:
        """See :meth:`ViewStore.drop_finished_before`."""
        space = self._keys.space(namespace)
        pipe = self._redis.pipeline(transaction=False)
        for group in space.groups:
            for status in sorted(FINISHED_STATUSES):
                pipe.zremrangebyscore(space.status_index(status, group), "-inf", f"({before}")
        return sum(int(n) for n in await pipe.execute())

    @translated
    async def prune(self, namespace: str) -> int:
        """See :meth:`ViewStore.prune`."""
        space = self._keys.space(namespace)
        members: set[str] = set()
        intents: list[str] = []
        pipe = self._redis.pipeline(transaction=False)
        for group in space.groups:
            for status in STATUSES:
                pipe.zrange(space.status_index(status, group), 0, -1)
            pipe.zrange(space.intents_index(group), 0, -1)
        replies = list(await pipe.execute())
        per_group = len(STATUSES) + 1
        for n, reply in enumerate(replies):
            if n % per_group == len(STATUSES):
                intents += texts(reply)
            else:
                members.update(texts(reply))
        members.update(parse_intent_member(m)[0] for m in intents)
        ordered = sorted(members)
        pipe = self._redis.pipeline(transaction=False)
        for run_id in ordered:
            pipe.exists(space.run(run_id))
        gone = [r for r, exists in zip(ordered, await pipe.execute(), strict=True) if not exists]
        if gone:
            gone_set = set(gone)
            closed: dict[Group, list[str]] = {}
            for m in intents:
                run_id = parse_intent_member(m)[0]
                if run_id in gone_set:
                    closed.setdefault(space.group_of(run_id), []).append(m)
            await self.update_indexes(
                namespace,
                [IndexUpdate(run_id=r, status=None) for r in gone],
            )
            for group, found in closed.items():
                await self._redis.zrem(space.intents_index(group), *found)
        return len(gone)

    # --- verify -------------------------------------------------------------------------

    @translated
    async def snapshot(self, namespace: str) -> dict[str, SnapshotValue]:
        """See :meth:`ViewStore.snapshot`."""
        space = self._keys.space(namespace)
        result: dict[str, SnapshotValue] = {}
        async for chunk in scan_chunks(self._redis, space.pattern):
            names = [k.decode() for k in chunk if not space.is_progress(k.decode())]
            result.update(await snapshot_keys(self._redis, space, names))
        return result

    # --- read side ----------------------------------------------------------------------

    @translated
    async def load_at_every(self, run_id: str) -> ViewAt | None:
        """See :meth:`ViewStore.load_at_every`, in two round trips on one Redis: the pointer,
        then one MULTI/EXEC of the progress, the run's four hashes and the pointer again. The
        progress and the view are then read at one instant (the view holds everything below the
        progress, which is raised only after the views it covers are written), and the pointer
        still naming the namespace at that instant means it was live, so not dropped, when they
        were read. A Redis Cluster reads them in the four steps of the generic reader.

        The pointer's first round trip is left out when the namespace was seen on this Redis
        before (:meth:`saw_pointer`: a run-index claim reads it along): the MULTI/EXEC reads
        that namespace, and its own read of the pointer says whether it was live at that
        instant, which is all the first read was for; when it was not, the namespace the
        pointer named then is read the same way (DESIGN.md §13, "Resume, session 19")."""
        if is_cluster(self._redis):
            return await super().load_at_every(run_id)
        seen = self._seen
        namespace = seen if seen is not None else await self.live_namespace()
        if namespace is None:
            return None
        replies, live = await self._read_at_every(namespace, run_id)
        if live != namespace and seen is not None and live is not None:
            # the namespace last seen is no longer live: read the one live at that check, as if
            # the pointer had been read first (the pointer's own round trip, only after a swap)
            namespace = live
            replies, live = await self._read_at_every(namespace, run_id)
        if live != namespace:
            return None  # a rebuild was swapped in meanwhile: read the log instead
        space = self._keys.space(namespace)
        groups = space.groups
        progress = _progress_of(replies[: len(groups)])
        run_hash, steps, effects, parked = replies[len(groups) : len(groups) + len(RUN_PARTS)]
        if token_of(run_hash) is None:
            return ViewAt(view=None, progress=progress, parked=[])
        return ViewAt(
            view=decode_run(run_hash, steps, effects),
            progress=progress,
            parked=[self._decode_parked(v) for v in parked.values()],
            dropped_from=dropped_of(run_hash),
        )

    async def _read_at_every(self, namespace: str, run_id: str) -> tuple[list[Any], str | None]:
        """One MULTI/EXEC of ``namespace``'s progress hashes, the run's four hashes and the
        pointer; the replies and the namespace the pointer named at that instant."""
        space = self._keys.space(namespace)
        pipe = self._redis.pipeline(transaction=True)
        for group in space.groups:
            pipe.hgetall(space.progress(group))
        for key in space.run_keys(run_id):
            pipe.hgetall(key)
        pipe.get(self._keys.pointer)
        replies = list(await pipe.execute())
        raw = replies[-1]
        self.saw_pointer(raw)
        return replies, None if raw is None else text(raw)

    @translated
    async def progress(self, positions: list[Position]) -> bool:
        """See :meth:`ViewReader.progress`."""
        wanted = [p for p in positions if p.offset > 0]
        if not wanted:
            return True
        namespace = await self.live_namespace()
        if namespace is None:
            return False
        space = self._keys.space(namespace)
        pipe = self._redis.pipeline(transaction=False)
        for p in wanted:
            group = space.group_of_partition(p.partition)
            pipe.hget(space.progress(group), progress_field(p.topic, p.partition))
        raw = await pipe.execute()
        return all(v is not None and int(v) >= p.offset for p, v in zip(wanted, raw, strict=True))

    @translated
    async def runs_by_status(self, status: str, limit: int = 1000) -> list[str]:
        """See :meth:`ViewReader.runs_by_status` (least recently updated first)."""
        namespace = await self.live_namespace()
        if namespace is None or limit <= 0:
            return []
        space = self._keys.space(namespace)
        replies = await self._each_group(
            space,
            lambda p, g: p.zrange(space.status_index(status, g), 0, limit - 1, withscores=True),
        )
        return [text(m) for m, _ in _merged(replies)[:limit]]

    @translated
    async def open_intents(
        self, older_than: int | None = None, limit: int = 1000
    ) -> list[OpenIntent]:
        """See :meth:`ViewReader.open_intents`."""
        namespace = await self.live_namespace()
        if namespace is None or limit <= 0:
            return []
        space = self._keys.space(namespace)
        top = "+inf" if older_than is None else f"({older_than}"
        replies = await self._each_group(
            space,
            lambda p, g: p.zrangebyscore(
                space.intents_index(g), "-inf", top, start=0, num=limit, withscores=True
            ),
        )
        found = []
        for member, score in _merged(replies)[:limit]:
            run_id, idem = parse_intent_member(text(member))
            found.append(OpenIntent(run_id=run_id, idempotency_key=idem, intended_at=int(score)))
        return found


def _group_order(group: Group) -> int:
    return -1 if group is None else group


def _merged(replies: list[Any]) -> list[tuple[bytes, float]]:
    """(member, score) replies of several groups' sorted sets, in one (score, member) order."""
    items = [(m, float(sc)) for reply in replies for m, sc in reply]
    return sorted(items, key=lambda x: (x[1], x[0]))


def _progress_of(hashes: Iterable[Mapping[bytes, bytes]]) -> dict[TopicPartition, int]:
    """The applied offset of each partition in the progress hashes of a namespace's groups
    (every field but the birth mark)."""
    found: dict[TopicPartition, int] = {}
    for raw in hashes:
        for k, v in raw.items():
            if text(k) != BORN_FIELD:
                found[parse_progress_field(text(k))] = int(v)
    return found
