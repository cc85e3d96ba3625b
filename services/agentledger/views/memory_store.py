"""The in-memory view store: the same key layout as Redis, kept in dicts (tests, the SDK's tests).

It lays views out exactly like :class:`RedisViewStore` (same key names, same encoded values), so
the contract suite can compare the two stores' snapshots key for key.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection, Mapping, Sequence
from types import TracebackType
from typing import Self

from agentledger.errors import ViewsRegressedError, ViewsWipedError
from agentledger.events.codec import EventCodec
from agentledger.events.models import FINISHED_STATUSES, RunEvent, now_ms
from agentledger.events.positions import Position
from agentledger.views.keys import (
    BORN_FIELD,
    STATUSES,
    Keys,
    parse_progress_field,
    progress_field,
)
from agentledger.views.layout import (
    decode_run,
    dropped_of,
    encode_effect,
    encode_run,
    encode_step,
    token_of,
)
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


class MemoryViewStore(ViewStore):
    """Views in process memory; ``clock`` (epoch ms) drives TTLs and the parked index."""

    def __init__(
        self,
        *,
        key_prefix: str = "al",
        codec: EventCodec | None = None,
        retention_ms: int | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self._keys = Keys(key_prefix)
        self._codec = codec or EventCodec()
        self._retention_ms = retention_ms
        self._clock = clock
        self._strings: dict[str, str] = {}
        self._hashes: dict[str, dict[str, bytes]] = {}
        self._zsets: dict[str, dict[str, float]] = {}
        self._expiry: dict[str, int] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Nothing to release (idempotent, for symmetry with the Redis store)."""

    def flushall(self) -> None:
        """Forget everything, like Redis FLUSHALL."""
        self._strings.clear()
        self._hashes.clear()
        self._zsets.clear()
        self._expiry.clear()

    # --- the emulated keyspace ---------------------------------------------------------

    def _expire_due(self, key: str) -> None:
        deadline = self._expiry.get(key)
        if deadline is not None and deadline <= self._clock():
            self._delete(key)

    def _delete(self, key: str) -> bool:
        self._expiry.pop(key, None)
        found = [d.pop(key, None) is not None for d in (self._strings, self._hashes, self._zsets)]
        return any(found)

    def _hash(self, key: str) -> dict[str, bytes]:
        self._expire_due(key)
        return self._hashes.get(key, {})

    def _zset(self, key: str) -> dict[str, float]:
        self._expire_due(key)
        return self._zsets.setdefault(key, {})

    def _all_keys(self) -> list[str]:
        for key in list(self._expiry):
            self._expire_due(key)
        return [*self._strings, *self._hashes, *(k for k, v in self._zsets.items() if v)]

    # --- namespaces ---------------------------------------------------------------------

    async def live_namespace(self, *, create: bool = False) -> str | None:
        """See :meth:`ViewStore.live_namespace`."""
        if self._keys.pointer not in self._strings and create:
            fresh = await self.create_namespace()
            self._strings.setdefault(self._keys.pointer, fresh)
        return self._strings.get(self._keys.pointer)

    async def create_namespace(self) -> str:
        """See :meth:`ViewStore.create_namespace`."""
        name = f"v{secrets.token_hex(4)}"
        self._hashes.setdefault(self._keys.space(name).progress(), {})[BORN_FIELD] = b"1"
        self._zset(self._keys.registry)[name] = float(self._clock())
        return name

    async def mark_namespace(self, namespace: str) -> None:
        """See :meth:`ViewStore.mark_namespace`."""
        self._hashes.setdefault(self._keys.space(namespace).progress(), {}).setdefault(
            BORN_FIELD, b"1"
        )

    async def is_marked(self, namespace: str) -> bool:
        """See :meth:`ViewStore.is_marked`."""
        return BORN_FIELD in self._hash(self._keys.space(namespace).progress())

    async def replace_live(self, old: str, fresh: str) -> str:
        """See :meth:`ViewStore.replace_live`."""
        current = self._strings.get(self._keys.pointer)
        if current is None or current == old:
            self._strings[self._keys.pointer] = fresh
            return fresh
        return current

    async def swap(self, namespace: str) -> str | None:
        """See :meth:`ViewStore.swap`."""
        old = self._strings.get(self._keys.pointer)
        self._strings[self._keys.pointer] = namespace
        return old

    async def drop_namespace(self, namespace: str) -> int:
        """See :meth:`ViewStore.drop_namespace`."""
        if namespace == await self.live_namespace():
            return 0
        base = self._keys.space(namespace).pattern[:-1]
        doomed = [k for k in self._all_keys() if k.startswith(base)]
        for key in doomed:
            self._delete(key)
        self._zset(self._keys.registry).pop(namespace, None)
        return len(doomed)

    async def namespaces(self) -> list[str]:
        """See :meth:`ViewStore.namespaces`."""
        reg = self._zset(self._keys.registry)
        return sorted(reg, key=lambda n: (reg[n], n))

    # --- runs ---------------------------------------------------------------------------

    async def load_runs(
        self, namespace: str, run_ids: Sequence[str], *, only: Collection[str] | None = None
    ) -> dict[str, StoredRun]:
        """See :meth:`ViewStore.load_runs` (``only`` as there: the brief view's fields)."""
        space = self._keys.space(namespace)
        found: dict[str, StoredRun] = {}
        for run_id in run_ids:
            run_hash, steps, effects, parked = (self._hash(k) for k in space.run_keys(run_id))
            token = token_of(run_hash)
            if token is None:
                continue
            events = [self._decode_parked(v) for v in parked.values()]
            found[run_id] = StoredRun(
                decode_run(run_hash, {} if only is not None else steps, effects, only=only),
                events,
                token,
                dropped_of(run_hash),
            )
        return found

    def _decode_parked(self, value: bytes) -> RunEvent:
        event = self._codec.decode(value)
        if not isinstance(event, RunEvent):
            msg = f"parked record is a {type(event).__name__}, not a run event"
            raise TypeError(msg)
        return event

    async def write_runs(self, namespace: str, writes: Sequence[RunWrite]) -> WriteOutcome:
        """See :meth:`ViewStore.write_runs`."""
        space = self._keys.space(namespace)
        now = self._clock()
        outcome = WriteOutcome()
        for write in writes:
            keys = space.run_keys(write.run_id)
            if token_of(self._hash(keys[0])) != write.expected:
                outcome.conflicts.add(write.run_id)
                continue
            ttl = retention_ttl(write.view, self._retention_ms, now)
            if ttl is not None and ttl <= 0:
                for key in keys:
                    self._delete(key)
                outcome.expired.add(write.run_id)
                continue
            self._store(keys, write)
            if ttl is not None:
                for key in keys:
                    if key in self._hashes:
                        self._expiry[key] = now + ttl
        return outcome

    def _store(self, keys: list[str], write: RunWrite) -> None:
        view = write.view
        run_key, steps_key, effects_key, parked_key = keys
        self._hashes.setdefault(run_key, {}).update(
            encode_run(view, len(write.parked), write.dropped_from)
        )
        steps = {str(i): encode_step(view.steps[i]) for i in write.steps if i in view.steps}
        if steps:
            self._hashes.setdefault(steps_key, {}).update(steps)
        effects = {k: encode_effect(view.effects[k]) for k in write.effects if k in view.effects}
        if effects:
            self._hashes.setdefault(effects_key, {}).update(effects)
        if write.parked_changed:
            self._delete(parked_key)
            if write.parked:
                self._hashes[parked_key] = {e.event_id: self._codec.encode(e) for e in write.parked}

    # --- indexes and progress -----------------------------------------------------------

    async def update_indexes(
        self,
        namespace: str,
        updates: Sequence[IndexUpdate],
        progress: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """See :meth:`ViewStore.update_indexes`."""
        if not updates and not progress:
            return
        self._check_born(namespace)
        await self._index(namespace, updates)
        if progress:
            await self.record_progress(namespace, progress)

    def _check_born(self, namespace: str) -> None:
        if BORN_FIELD not in self._hash(self._keys.space(namespace).progress()):
            msg = f"the progress of namespace {namespace} vanished (wiped?)"
            raise ViewsWipedError(msg, namespace=namespace)

    async def _index(self, namespace: str, updates: Sequence[IndexUpdate]) -> None:
        space = self._keys.space(namespace)
        now = float(self._clock())
        for u in updates:
            drops = STATUSES if u.status is None else u.drop_statuses
            for status in drops:
                if status != u.status:
                    self._zset(space.status_index(status)).pop(u.run_id, None)
            if u.status is not None:
                self._zset(space.status_index(u.status))[u.run_id] = float(u.updated_at)
            intents = self._zset(space.intents_index())
            for key, at in u.open_intents.items():
                intents[intent_member(u.run_id, key)] = float(at)
            for key in u.closed_intents:
                intents.pop(intent_member(u.run_id, key), None)
            parked = self._zset(space.parked_index())
            if u.parked and u.status is not None:
                parked.setdefault(u.run_id, now)
            else:
                parked.pop(u.run_id, None)

    async def record_progress(
        self,
        namespace: str,
        offsets: Mapping[TopicPartition, int],
        floors: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """See :meth:`ViewStore.record_progress`."""
        if not offsets and not floors:
            return
        self._check_born(namespace)
        progress = self._hashes.setdefault(self._keys.space(namespace).progress(), {})
        for (topic, partition), floor in (floors or {}).items():
            name = progress_field(topic, partition)
            if int(progress.get(name, b"-1")) < floor:
                msg = f"progress {name} of {namespace} is below {floor}: writes were lost"
                raise ViewsRegressedError(msg, namespace=namespace, field=name)
        for (topic, partition), offset in offsets.items():
            name = progress_field(topic, partition)
            if int(progress.get(name, b"-1")) < offset:
                progress[name] = str(offset).encode()

    async def read_progress(self, namespace: str) -> dict[TopicPartition, int]:
        """See :meth:`ViewStore.read_progress`."""
        raw = self._hash(self._keys.space(namespace).progress())
        return {parse_progress_field(k): int(v) for k, v in raw.items() if k != BORN_FIELD}

    async def overdue_parked(self, namespace: str, parked_before: int) -> list[str]:
        """See :meth:`ViewStore.overdue_parked`."""
        parked = self._zset(self._keys.space(namespace).parked_index())
        return sorted((r for r, t in parked.items() if t < parked_before), key=parked.__getitem__)

    async def drop_finished_before(self, namespace: str, before: int) -> int:
        """See :meth:`ViewStore.drop_finished_before`."""
        space = self._keys.space(namespace)
        dropped = 0
        for status in FINISHED_STATUSES:
            index = self._zset(space.status_index(status))
            for run_id in [r for r, at in index.items() if at < before]:
                del index[run_id]
                dropped += 1
        return dropped

    async def prune(self, namespace: str) -> int:
        """See :meth:`ViewStore.prune`."""
        space = self._keys.space(namespace)
        members: set[str] = set()
        for status in STATUSES:
            members.update(self._zset(space.status_index(status)))
        intents = self._zset(space.intents_index())
        members.update(parse_intent_member(m)[0] for m in intents)
        gone = sorted(r for r in members if not self._hash(space.run(r)))
        await self.update_indexes(namespace, [IndexUpdate(run_id=r, status=None) for r in gone])
        gone_set = set(gone)
        for member in [m for m in intents if parse_intent_member(m)[0] in gone_set]:
            intents.pop(member)
        return len(gone)

    async def snapshot(self, namespace: str) -> dict[str, SnapshotValue]:
        """See :meth:`ViewStore.snapshot`."""
        space = self._keys.space(namespace)
        base = space.pattern[:-1]
        out: dict[str, SnapshotValue] = {}
        for key in self._all_keys():
            if not key.startswith(base) or key == space.progress():
                continue
            has_ttl = key in self._expiry
            content: object
            if key in self._hashes:
                kind, content = "hash", dict(self._hashes[key])
            elif key in self._zsets:
                pairs = sorted(self._zsets[key].items())
                kind = "zset"
                content = [m for m, _ in pairs] if key == space.parked_index() else pairs
            else:
                kind, content = "string", self._strings[key].encode()
            out[space.relative(key)] = (kind, content, has_ttl)
        return out

    # --- read side ----------------------------------------------------------------------

    async def progress(self, positions: list[Position]) -> bool:
        """See :meth:`ViewReader.progress()`."""
        wanted = [p for p in positions if p.offset > 0]
        if not wanted:
            return True
        namespace = await self.live_namespace()
        if namespace is None:
            return False
        done = await self.read_progress(namespace)
        return all(done.get((p.topic, p.partition), -1) >= p.offset for p in wanted)

    async def runs_by_status(self, status: str, limit: int = 1000) -> list[str]:
        """See :meth:`ViewReader.runs_by_status` (least recently updated first)."""
        namespace = await self.live_namespace()
        if namespace is None or limit <= 0:
            return []
        index = self._zset(self._keys.space(namespace).status_index(status))
        return [r for r, _ in sorted(index.items(), key=lambda kv: (kv[1], kv[0]))][:limit]

    async def open_intents(
        self, older_than: int | None = None, limit: int = 1000
    ) -> list[OpenIntent]:
        """See :meth:`ViewReader.open_intents`."""
        namespace = await self.live_namespace()
        if namespace is None or limit <= 0:
            return []
        index = self._zset(self._keys.space(namespace).intents_index())
        ordered = sorted(index.items(), key=lambda kv: (kv[1], kv[0]))
        found = []
        for member, score in ordered:
            if older_than is not None and score >= older_than:
                break
            run_id, key = parse_intent_member(member)
            found.append(OpenIntent(run_id=run_id, idempotency_key=key, intended_at=int(score)))
        return found[:limit]
