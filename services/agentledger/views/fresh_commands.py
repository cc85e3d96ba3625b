"""A rebuild's writes into a fresh namespace as plain Redis commands, packed here in one buffer.

:data:`~.redis_fresh.WRITE_FRESH` stores a slice of runs with one script call, but Redis then
takes every argument twice (into Lua, then back through ``redis.call``): about half the
server's CPU of a rebuild. Nobody reads or writes a fresh namespace until it is swapped in, and
a rebuild that fails (or is killed) never swaps it in, so a slice needs no atomicity and no
token: plain ``HSET``/``PEXPIRE``/``ZADD`` commands store exactly what the script stores, key
for key. :func:`fresh_commands` packs them (hiredis's packer, one join for the slice) and
counts their replies; :func:`send_packed` sends the buffer on one pooled connection and reads
that many replies straight from hiredis's reader (every reply is an integer or an error, read
without one coroutine a reply), raising the first error.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any, cast

import hiredis
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from agentledger.events.codec import EventCodec
from agentledger.views.keys import STATUSES, Group, SpaceKeys
from agentledger.views.store import FreshRun
from agentledger.views.support import intent_member, unexpired

_STATUS_SET = frozenset(STATUSES)
#: hiredis's packer (in C: what redis-py's connections send; its stub types a 1-tuple)
pack_command = cast("Callable[[tuple[Any, ...]], bytes]", hiredis.pack_command)


class Packed:
    """The packed commands of a slice: their bytes, how many replies they get, the runs past
    retention (left out: stored nowhere, indexed nowhere)."""

    __slots__ = ("expired", "payload", "replies")

    def __init__(self, payload: bytes, replies: int, expired: set[str]) -> None:
        self.payload = payload
        self.replies = replies
        self.expired = expired


#: per slot group: status -> [score, run, ...], open intents [score, member, ...], parked runs
_Entries = tuple[dict[str, list[Any]], list[Any], list[Any]]


def fresh_commands(
    space: SpaceKeys,
    runs: Sequence[FreshRun],
    *,
    codec: EventCodec,
    retention_ms: int | None,
    now: int,
) -> Packed:
    """The commands that store ``runs`` (and their index entries) in a fresh namespace as
    WRITE_FRESH stores them: each run's non-empty hashes, a PEXPIRE of each hash written when
    the run has a retention, and per slot group one ZADD per status index, one of open intents
    and one ``NX`` of parked runs."""
    out: list[bytes] = []
    expired: set[str] = set()
    indexes: dict[Group, _Entries] = {}
    for run, ttl in unexpired(runs, retention_ms, now, expired):
        status = run.index.status
        if status is not None and status not in _STATUS_SET:
            msg = f"run {run.run_id}: status {status!r} is not one of {STATUSES}"
            raise ValueError(msg)
        _add_hashes(out, space.run_keys(run.run_id), run, codec, ttl)
        group = space.group_of(run.run_id)
        entries = indexes.get(group)
        if entries is None:
            entries = indexes[group] = ({}, [], [])
        _add_entries(entries, run, now)
    for group, (statuses, intents, parked) in indexes.items():
        for status, members in statuses.items():
            out.append(pack_command(("ZADD", space.status_index(status, group), *members)))
        if intents:
            out.append(pack_command(("ZADD", space.intents_index(group), *intents)))
        if parked:
            out.append(pack_command(("ZADD", space.parked_index(group), "NX", *parked)))
    return Packed(b"".join(out), len(out), expired)


def _add_hashes(
    out: list[bytes], keys: list[str], run: FreshRun, codec: EventCodec, ttl: int | None
) -> None:
    """One HSET per non-empty hash of ``run`` (run, steps, effects, parked: WRITE_FRESH's
    ``hset_from`` writes nothing for an empty one), then their PEXPIREs."""
    written = []
    for key, values in zip(keys, (run.fields, run.steps, run.effects), strict=False):
        if values:
            out.append(pack_command(("HSET", key, *chain.from_iterable(values.items()))))
            written.append(key)
    if run.parked:
        flat: list[Any] = ["HSET", keys[3]]
        for event in run.parked:
            flat += (event.event_id, codec.encode(event))
        out.append(pack_command(tuple(flat)))
        written.append(keys[3])
    if ttl is not None:
        out += [pack_command(("PEXPIRE", key, ttl)) for key in written]


def _add_entries(entries: _Entries, run: FreshRun, now: int) -> None:
    """``run``'s index entries, added to its slot group's."""
    u = run.index
    statuses, intents, parked = entries
    if u.status is not None:
        statuses.setdefault(u.status, []).extend((u.updated_at, run.run_id))
        if u.parked:
            parked.extend((now, run.run_id))
    for key, at in u.open_intents.items():
        intents.extend((at, intent_member(run.run_id, key)))


async def send_packed(client: aioredis.Redis, payload: bytes, replies: int) -> None:
    """Send ``payload`` on one of ``client``'s pooled connections and read its ``replies``;
    raises the first error reply as ResponseError (after reading them all, so the connection
    goes back clean), and drops the connection when the exchange does not finish (a lost
    connection, or no bytes for the connection's socket timeout: OSError, which the store's
    callers see as UnreachableError)."""
    pool = client.connection_pool
    conn = await pool.get_connection()  # type: ignore[no-untyped-call]  # redis-py lacks a hint
    try:
        # a reader of its own on the connection's stream: replies without a coroutine each (the
        # connection has nothing unread when the pool hands it out, and gets only these replies)
        reader = hiredis.Reader()
        stream = conn._reader  # the stream redis-py's own parsers read from
        timeout = conn.socket_timeout  # as long as redis-py waits for one read
        await conn.send_packed_command(payload, check_health=False)
        error: BaseException | None = None
        left = replies
        while left:
            reply = reader.gets(False)
            if reply is False:
                async with asyncio.timeout(timeout):
                    chunk = await stream.read(65536)
                if not chunk:
                    msg = "Redis closed the connection during a rebuild's write"
                    raise ConnectionError(msg)
                reader.feed(chunk)
                continue
            left -= 1
            if error is None and isinstance(reply, BaseException):
                error = reply
        if error is not None:
            raise ResponseError(str(error))
    except BaseException:
        await conn.disconnect()
        raise
    finally:
        await pool.release(conn)


def plain_commands_ok(client: aioredis.Redis) -> bool:
    """Whether :func:`send_packed` can write through ``client``: one Redis, not a cluster (whose
    client routes each command by its key to its node)."""
    return isinstance(client, aioredis.Redis)
