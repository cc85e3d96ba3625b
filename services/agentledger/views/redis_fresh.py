"""A rebuild's writes into a fresh Redis namespace: many runs and their index entries per call.

Nobody reads or writes a namespace a rebuild fills until it is swapped in, so no run's token is
compared (there is none), nothing stored needs dropping first and every index entry is an add:
one :data:`WRITE_FRESH` script writes a whole slice of runs with their index entries, instead of
a token-checking WRITE_RUN per run and then UPDATE_INDEXES. What it stores is what
:meth:`~agentledger.views.store.ViewStore.write_runs` and ``update_indexes`` store for the same
writes, key for key (a contract test compares the two).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentledger.events.codec import EventCodec
from agentledger.views.keys import STATUSES, Group, SpaceKeys
from agentledger.views.layout import encode_effect, encode_run, encode_step
from agentledger.views.scripts import WRITE_HASHES
from agentledger.views.store import FreshRun, IndexUpdate, RunWrite
from agentledger.views.support import intent_member, unexpired

#: Runs of one slot group and their index entries, added to a fresh namespace.
#: KEYS: 4 per run (run, steps, effects, parked), then the group's status indexes in
#: keys.STATUSES order, intents, parked.
#: ARGV: now ms, #runs, then per run: run id, ttl ms ('' = keep forever), #run fields, #steps,
#: #effects, #parked, status position ('' = not indexed by status), status score, #open
#: intents, parked ('1'/'0'), the field/value pairs of its four hashes in that order, then its
#: open intents as (member, score) pairs.  Returns the number of runs written.
WRITE_FRESH = (
    WRITE_HASHES
    + """
local runs = tonumber(ARGV[2])
local base = 4 * runs
local n_status = #KEYS - base - 2
local intents = KEYS[base + n_status + 1]
local parked = KEYS[base + n_status + 2]
local now = ARGV[1]
local i = 3
for r = 0, runs - 1 do
  local k = 4 * r
  local run = ARGV[i]
  local ttl = ARGV[i + 1]
  local status = ARGV[i + 6]
  local n_open = tonumber(ARGV[i + 8])
  local is_parked = ARGV[i + 9]
  local p = i + 10
  p = hset_from(KEYS[k + 1], p, tonumber(ARGV[i + 2]))
  p = hset_from(KEYS[k + 2], p, tonumber(ARGV[i + 3]))
  p = hset_from(KEYS[k + 3], p, tonumber(ARGV[i + 4]))
  p = hset_from(KEYS[k + 4], p, tonumber(ARGV[i + 5]))
  if ttl ~= '' then
    for part = 1, 4 do
      redis.call('PEXPIRE', KEYS[k + part], ttl)
    end
  end
  if status ~= '' then
    redis.call('ZADD', KEYS[base + tonumber(status)], ARGV[i + 7], run)
  end
  for _ = 1, n_open do
    redis.call('ZADD', intents, ARGV[p + 1], ARGV[p])
    p = p + 2
  end
  if is_parked == '1' and status ~= '' then
    redis.call('ZADD', parked, 'NX', now, run)
  end
  i = p
end
return runs
"""
)

_POSITION = {status: str(n).encode() for n, status in enumerate(STATUSES, start=1)}
#: Script call: (keys, args) of one slot group.
Call = tuple[list[str], list[Any]]


def fresh_calls(
    space: SpaceKeys,
    writes: Sequence[RunWrite],
    updates: Mapping[str, IndexUpdate],
    *,
    codec: EventCodec,
    retention_ms: int | None,
    now: int,
) -> tuple[list[Call], set[str]]:
    """The WRITE_FRESH calls of ``writes`` (one per slot group) and the runs past retention,
    which are left out: stored nowhere, indexed nowhere."""
    runs = [fresh_run(w, updates[w.run_id]) for w in writes]
    return stored_calls(space, runs, codec=codec, retention_ms=retention_ms, now=now)


def fresh_run(w: RunWrite, u: IndexUpdate) -> FreshRun:
    """A view's write in its stored form (what :func:`stored_calls` sends)."""
    view = w.view
    ended = view.finished_at if view.finished_at is not None else view.updated_at
    return FreshRun(
        run_id=w.run_id,
        fields=encode_run(view, len(w.parked), w.dropped_from),
        steps={str(i): encode_step(view.steps[i]) for i in w.steps if i in view.steps},
        effects={k: encode_effect(view.effects[k]) for k in w.effects if k in view.effects},
        parked=w.parked if w.parked_changed else [],
        status=view.status,
        ended_at=ended,
        index=u,
    )


def stored_calls(
    space: SpaceKeys,
    runs: Sequence[FreshRun],
    *,
    codec: EventCodec,
    retention_ms: int | None,
    now: int,
) -> tuple[list[Call], set[str]]:
    """The WRITE_FRESH calls of runs in their stored form (one per slot group) and the runs
    past retention, which are left out: stored nowhere, indexed nowhere."""
    expired: set[str] = set()
    by_group: dict[Group, Call] = {}
    for run, ttl in unexpired(runs, retention_ms, now, expired):
        group = space.group_of(run.run_id)
        call = by_group.get(group)
        if call is None:
            call = by_group[group] = ([], [now, 0])
        keys, args = call
        keys += space.run_keys(run.run_id)
        args[1] += 1
        _add_run(args, run, codec, ttl)
    calls = []
    for group, (keys, args) in by_group.items():
        keys += [space.status_index(s, group) for s in STATUSES]
        keys += [space.intents_index(group), space.parked_index(group)]
        calls.append((keys, args))
    return calls, expired


def _add_run(args: list[Any], run: FreshRun, codec: EventCodec, ttl: int | None) -> None:
    """One run's WRITE_FRESH arguments, appended to ``args``."""
    u = run.index
    fields = run.fields
    parked = [(e.event_id, codec.encode(e)) for e in run.parked]
    status = b"" if u.status is None else _POSITION.get(u.status)
    if status is None:
        msg = f"run {u.run_id}: status {u.status!r} is not one of {STATUSES}"
        raise ValueError(msg)
    args += (
        run.run_id,
        b"" if ttl is None else ttl,
        len(fields),
        len(run.steps),
        len(run.effects),
        len(parked),
        status,
        u.updated_at,
        len(u.open_intents),
        b"1" if u.parked else b"0",
    )
    for pairs in (fields, run.steps, run.effects):
        for name, value in pairs.items():
            args += (name, value)
    for name, value in parked:
        args += (name, value)
    for key, at in u.open_intents.items():
        args += (intent_member(u.run_id, key), at)
