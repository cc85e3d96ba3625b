"""Lua scripts of the Redis view store; each call touches the keys of one hash slot only
(a plain namespace on a single Redis may pass one COMMIT the keys of many slots)."""

from __future__ import annotations

#: Replace one run atomically if its (applied_seq, _parked) token is still the expected one.
#: KEYS: run, steps, effects, parked.  ARGV: expected applied_seq, expected parked count,
#: ttl ms ('' = keep forever, <= 0 = delete the run), #run fields, #steps, #effects,
#: replace parked ('1'/'0'), #parked, then the field/value pairs in that order.
#: Returns 1 written, 0 conflict, 2 deleted (past retention).
#: One run's four hashes written from ARGV: KEYS[k + 1..k + 4] (run, steps, effects, parked),
#: ARGV[b..]: #run fields, #steps, #effects, replace parked ('1'/'0'), #parked, then the
#: field/value pairs in that order; ``ttl`` ('' = keep forever) is set on all four. WRITE_RUN
#: and COMMIT both write a run with it (one body, so the two cannot drift apart).
WRITE_HASHES = """
local function hset_from(key, p, n)
  local put = 0
  while put < n do
    local take = math.min(n - put, 1000)
    local first = p + 2 * put
    redis.call('HSET', key, unpack(ARGV, first, first + 2 * take - 1))
    put = put + take
  end
  return p + 2 * n
end
local function write_hashes(k, b, ttl)
  local p = b + 5
  p = hset_from(KEYS[k + 1], p, tonumber(ARGV[b]))
  p = hset_from(KEYS[k + 2], p, tonumber(ARGV[b + 1]))
  p = hset_from(KEYS[k + 3], p, tonumber(ARGV[b + 2]))
  if ARGV[b + 3] == '1' then
    redis.call('DEL', KEYS[k + 4])
    hset_from(KEYS[k + 4], p, tonumber(ARGV[b + 4]))
  end
  if ttl ~= '' then
    for part = 1, 4 do
      redis.call('PEXPIRE', KEYS[k + part], ttl)
    end
  end
end
"""

#: Replace one run atomically if its (applied_seq, _parked) token is still the expected one.
#: KEYS: run, steps, effects, parked.  ARGV: expected applied_seq, expected parked count,
#: ttl ms ('' = keep forever, <= 0 = delete the run), #run fields, #steps, #effects,
#: replace parked ('1'/'0'), #parked, then the field/value pairs in that order.
#: Returns 1 written, 0 conflict, 2 deleted (past retention).
WRITE_RUN = (
    WRITE_HASHES
    + """
local cur_a = redis.call('HGET', KEYS[1], 'applied_seq') or ''
local cur_p = redis.call('HGET', KEYS[1], '_parked') or ''
if cur_a ~= ARGV[1] or cur_p ~= ARGV[2] then
  return 0
end
local ttl = ARGV[3]
if ttl ~= '' and tonumber(ttl) <= 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  return 2
end
write_hashes(0, 4, ttl)
return 1
"""
)

#: The four hashes of one run in one call.  KEYS: run, steps, effects, parked.
LOAD_RUN = """
return {
  redis.call('HGETALL', KEYS[1]),
  redis.call('HGETALL', KEYS[2]),
  redis.call('HGETALL', KEYS[3]),
  redis.call('HGETALL', KEYS[4]),
}
"""

#: KEYS: the four hashes of each of many runs in turn (one Redis, not a cluster) -> each
#: hash's flat HGETALL reply, in KEYS order: one reply for a batch of runs.
LOAD_RUNS = """
local out = {}
for i, key in ipairs(KEYS) do
  out[i] = redis.call('HGETALL', key)
end
return out
"""

#: KEYS: the run, effects and parked hashes of each of many runs in turn (one Redis, not a
#: cluster); ARGV: the run fields to read -> per run, {} if it has no run hash, else the fields'
#: values (HMGET: nil where absent), the flat HGETALL of its effects and of its parked events.
#: A brief read's (reconciler claims): 8 of a run's 27 fields and no steps cross the wire.
LOAD_BRIEF_RUNS = """
local out = {}
local n = 0
for i = 1, #KEYS, 3 do
  n = n + 1
  if redis.call('EXISTS', KEYS[i]) == 0 then
    out[n] = {}
  else
    out[n] = {
      redis.call('HMGET', KEYS[i], unpack(ARGV)),
      redis.call('HGETALL', KEYS[i + 1]),
      redis.call('HGETALL', KEYS[i + 2]),
    }
  end
end
return out
"""

#: The index entries of the runs in ARGV from position ``i`` to the end, as UPDATE_INDEXES and
#: COMMIT both take them (one body, so the two cannot drift apart). The caller sets ``base``
#: (how many KEYS come before the first status index), ``intents``, ``parked`` and ``now``.
INDEX_ENTRIES = """
while i <= #ARGV do
  local run = ARGV[i]
  local status = ARGV[i + 1]
  local score = ARGV[i + 2]
  local n_drop = tonumber(ARGV[i + 3])
  i = i + 4
  for _ = 1, n_drop do
    redis.call('ZREM', KEYS[base + tonumber(ARGV[i])], run)
    i = i + 1
  end
  if status ~= '' then
    redis.call('ZADD', KEYS[base + tonumber(status)], score, run)
  end
  local n_open = tonumber(ARGV[i])
  i = i + 1
  for _ = 1, n_open do
    redis.call('ZADD', intents, ARGV[i + 1], ARGV[i])
    i = i + 2
  end
  local n_closed = tonumber(ARGV[i])
  i = i + 1
  for _ = 1, n_closed do
    redis.call('ZREM', intents, ARGV[i])
    i = i + 1
  end
  if ARGV[i] == '1' and status ~= '' then
    redis.call('ZADD', parked, 'NX', now, run)
  else
    redis.call('ZREM', parked, run)
  end
  i = i + 1
end
"""

#: Index entries of many runs, and then the batch's progress, in one call (every index key and
#: the progress hash share the {idx} slot).
#: KEYS: the status indexes in keys.STATUSES order, then intents, parked, progress.
#: ARGV: now ms, #progress pairs, (field, offset) pairs (raised, never lowered),
#: then per run: run id, status ('' = drop everywhere), score, #drop statuses,
#: the drop statuses' positions (1-based in KEYS), #open intents, (member, score) pairs,
#: #closed intents, members, parked ('1'/'0').
#: Returns 1, or 0 (nothing written) when the progress hash lost its '_born' mark (a wipe).
UPDATE_INDEXES = (
    """
local n_status = #KEYS - 3
local intents = KEYS[n_status + 1]
local parked = KEYS[n_status + 2]
local progress = KEYS[n_status + 3]
if redis.call('HEXISTS', progress, '_born') == 0 then
  return 0
end
local now = ARGV[1]
local n_progress = tonumber(ARGV[2])
local base = 0
local i = 3 + 2 * n_progress
"""
    + INDEX_ENTRIES
    + """
for p = 1, n_progress do
  local field = ARGV[1 + 2 * p]
  local offset = ARGV[2 + 2 * p]
  local cur = redis.call('HGET', progress, field)
  if not cur or tonumber(cur) < tonumber(offset) then
    redis.call('HSET', progress, field, offset)
  end
end
return 1
"""
)

#: One slot group's share of a projector batch, all or nothing: the runs' views (each guarded by
#: its token), their index entries and the group's progress (DESIGN.md §14).
#: KEYS: 4 per written run (run, steps, effects, parked), then the status indexes in
#: keys.STATUSES order, intents, parked, progress.
#: ARGV: now ms, #writes, #progress, then (field, offset, floor) per progress field (floor ''
#: = none; the stored offset must be >= floor), then per write the arguments of WRITE_RUN
#: (expected applied_seq, expected parked, ttl, #run, #steps, #effects, replace parked,
#: #parked, pairs), then the index entries as UPDATE_INDEXES takes them (status positions
#: count from the first status index).
#: Returns {1, expired write numbers...}, {0, conflicting write numbers...} (nothing written),
#: {-1} (the progress lost its '_born' mark: a wipe) or {-2, field} (progress below its floor:
#: a failover lost writes of this slot).
COMMIT = (
    WRITE_HASHES
    + """
local n_writes = tonumber(ARGV[2])
local n_progress = tonumber(ARGV[3])
local first_index = 4 * n_writes
local n_status = #KEYS - first_index - 3
local intents = KEYS[first_index + n_status + 1]
local parked = KEYS[first_index + n_status + 2]
local progress = KEYS[first_index + n_status + 3]
if redis.call('HEXISTS', progress, '_born') == 0 then
  return {-1}
end
local i = 4
for _ = 1, n_progress do
  local floor = ARGV[i + 2]
  if floor ~= '' then
    local cur = redis.call('HGET', progress, ARGV[i])
    if (not cur) or tonumber(cur) < tonumber(floor) then
      return {-2, ARGV[i]}
    end
  end
  i = i + 3
end
local starts = {}
local conflicts = {0}
local pos = i
for w = 1, n_writes do
  starts[w] = pos
  local key = KEYS[4 * (w - 1) + 1]
  local cur_a = redis.call('HGET', key, 'applied_seq') or ''
  local cur_p = redis.call('HGET', key, '_parked') or ''
  if cur_a ~= ARGV[pos] or cur_p ~= ARGV[pos + 1] then
    conflicts[#conflicts + 1] = w
  end
  local pairs_n = tonumber(ARGV[pos + 3]) + tonumber(ARGV[pos + 4]) + tonumber(ARGV[pos + 5])
    + tonumber(ARGV[pos + 7])
  pos = pos + 8 + 2 * pairs_n
end
if #conflicts > 1 then
  return conflicts
end
local done = {1}
for w = 1, n_writes do
  local at = starts[w]
  local k = 4 * (w - 1)
  local ttl = ARGV[at + 2]
  if ttl ~= '' and tonumber(ttl) <= 0 then
    redis.call('DEL', KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4])
    done[#done + 1] = w
  else
    write_hashes(k, at + 3, ttl)
  end
end
local now = ARGV[1]
local base = first_index
i = pos
"""
    + INDEX_ENTRIES
    + """
i = 4
for _ = 1, n_progress do
  local cur = redis.call('HGET', progress, ARGV[i])
  if not cur or tonumber(cur) < tonumber(ARGV[i + 1]) then
    redis.call('HSET', progress, ARGV[i], ARGV[i + 1])
  end
  i = i + 3
end
return done
"""
)

#: Point at a fresh namespace unless somebody already pointed elsewhere.
#: KEYS: pointer.  ARGV: old namespace, fresh namespace.  Returns the live namespace.
REPLACE_LIVE = """
local cur = redis.call('GET', KEYS[1])
if (not cur) or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  return ARGV[2]
end
return cur
"""
