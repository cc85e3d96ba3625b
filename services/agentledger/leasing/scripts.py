"""The Lua scripts of the Redis lease store; time is the Redis server's (TIME), never a client's.

A lease is the hash ``<prefix>:{RUN}:lease`` with fields owner, fence, expires_at (epoch ms).
Release and expiry keep the hash and its fence; only a wipe of Redis loses it, hence ``floor``.
"""

from __future__ import annotations

from functools import cache

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local owner = redis.call('HGET', KEYS[1], 'owner') or ''
local fence = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
local expires = tonumber(redis.call('HGET', KEYS[1], 'expires_at') or '0')
"""

#: ARGV: owner, ttl_ms, floor, retain_ms
#: -> {1, fence, expires_at} or {0, fence, expires_at, holder, now}
ACQUIRE = (
    _NOW
    + """
if owner ~= '' and owner ~= ARGV[1] and expires > now then
  return {0, fence, expires, owner, now}
end
local floor = tonumber(ARGV[3])
if floor > fence then fence = floor end
fence = fence + 1
local exp = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'fence', fence, 'expires_at', exp)
redis.call('PEXPIRE', KEYS[1], exp - now + tonumber(ARGV[4]))
return {1, fence, exp}
"""
)

#: ARGV: owner, fence, ttl_ms, retain_ms
#: -> {1, expires_at} or {0, fence, expires_at, holder, now}
RENEW = (
    _NOW
    + """
if owner == ARGV[1] and fence == tonumber(ARGV[2]) and expires > now then
  local exp = now + tonumber(ARGV[3])
  redis.call('HSET', KEYS[1], 'expires_at', exp)
  redis.call('PEXPIRE', KEYS[1], exp - now + tonumber(ARGV[4]))
  return {1, exp}
end
return {0, fence, expires, owner, now}
"""
)

#: ARGV: owner, fence -> 1 if released, 0 if not held with that fence
RELEASE = (
    _NOW
    + """
if owner == ARGV[1] and fence == tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'owner', '', 'expires_at', 0)
  return 1
end
return 0
"""
)

#: -> {owner, fence, expires_at, now}
CURRENT = _NOW + "\nreturn {owner, fence, expires, now}\n"

#: ARGV: fence, owner -> 1 if stale (missing, released, expired, another fence or another
#: owner), else 0. The owner matters after a failover lost an acquisition: the same fence can
#: then be granted to a second owner (DESIGN.md §15).
STALE = (
    _NOW
    + """
if owner ~= '' and expires > now and fence == tonumber(ARGV[1]) and owner == ARGV[2] then
  return 0
end
return 1
"""
)

#: KEYS: the lease keys of many runs (one Redis, not a cluster); ARGV: fence, owner of each in
#: turn -> one 1 (stale) or 0 per key, as STALE says for it: one call for a group commit's runs.
STALE_MANY = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for i, key in ipairs(KEYS) do
  local held = redis.call('HMGET', key, 'owner', 'fence', 'expires_at')
  local owner = held[1] or ''
  local fence = tonumber(held[2] or '0')
  local expires = tonumber(held[3] or '0')
  local live = owner ~= '' and expires > now and fence == tonumber(ARGV[2 * i - 1])
    and owner == ARGV[2 * i]
  out[i] = live and 0 or 1
end
return out
"""


@cache
def for_many(script: str) -> str:
    """``script`` (one lease key, ARGV of its call) run for many keys in one call (one Redis, not
    a cluster): KEYS are the lease keys, ARGV[1] the number of arguments of each call, then
    every call's arguments in turn -> one reply per key, as ``script`` answers for it. Each
    key's body runs as it would alone (its KEYS and ARGV are the call's own)."""
    return (
        "local function one(KEYS, ARGV)\n"
        + script
        + """
end
local n = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local args = {}
  for j = 1, n do args[j] = ARGV[1 + (i - 1) * n + j] end
  out[i] = one({key}, args)
end
return out
"""
    )
