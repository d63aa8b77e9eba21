"""Lua scripts of the long-term tier. Each touches the keys of one hash slot (``FETCH``: see below).

Writes are plain commands (one ``HSET`` per memory, ``PEXPIRE`` after it when the
memory has a TTL, and the ``expires_at`` field that readers check, so a lost
``PEXPIRE`` can never make an expired memory visible). Scripts remain only where a
read must decide a write atomically:

``FETCH`` (memories by id, and their reinforcement): each document's fields with its
exact access count, read in one step; with ``reinforce`` 1 it also counts an access,
so a recall reads its hits and reinforces them in one round trip. On RediSearch every
write to a hash under the index prefix re-indexes the whole document, HNSW vector
included (measured: ~10 ms per HSET at 5k memories, against ~1 ms for the search
itself). So a recall must not rewrite the document every time: the exact access count
lives in the memory's counter key (``<name>:acc:{<doc key>}``, the document's slot),
and the document's ``last_accessed_at`` / ``access_count`` / ``keep`` snapshot, what
recency scoring, BetterDB Monitor and the reference library read, is rewritten on the
first access and then only when older than ``interval`` ms. A deleted memory is never
resurrected: each document is checked first (a gone one reads as nil). The only script
that takes many slots: one call for many memories on a single server, one per memory
on a cluster.

``RETIRE`` (a superseded or retracted fact): stamps the document and renames it out
of the index prefix to its history key (the same slot), only if it still exists, so
a fact another client deleted meanwhile never leaves a stub behind.

``REPLACE`` (an upsert by a caller's id): the old document is deleted and the new one
written in one step, so no reader sees a half-replaced memory and no field of the old
version survives; the replaced version goes to the front of the memory's update
history (kept to a bound, with the document's TTL), unless a replay already put it there.

``LOCK`` / ``UNLOCK``: a token lock that is safe to replay (a retried acquire whose
first reply was lost finds its own token and succeeds) and released only by its owner.
"""

from __future__ import annotations

__all__ = ["FETCH", "LOCK", "REPLACE", "RETIRE", "UNLOCK"]

# One access to a live memory: the counter's new value (returned), the document's snapshot when due.
_REINFORCE_FN = r"""
local function reinforce(doc, counter, now, half_life, interval)
  local n = redis.call('INCR', counter)
  local ttl = redis.call('PTTL', doc)
  if ttl > 0 then redis.call('PEXPIRE', counter, ttl) end
  local stored = tonumber(redis.call('HGET', doc, 'access_count')) or 0
  if n <= stored then
    -- The counter is new (first access through this library) or was lost: continue
    -- from the document's own count (written by another client, or a snapshot).
    n = stored + 1
    redis.call('SET', counter, n, 'KEEPTTL')
  end
  local last = tonumber(redis.call('HGET', doc, 'last_accessed_at')) or 0
  -- The first access always reaches the document (readers see it was recalled); later
  -- ones at most once per interval.
  if stored == 0 or now - last >= interval then
    local imp = tonumber(redis.call('HGET', doc, 'importance')) or 0.5
    if imp < 0.001 then imp = 0.001 end
    -- Recency counts from the later of the access and valid_from (a plan dated ahead).
    local seen = tonumber(redis.call('HGET', doc, 'valid_from')) or now
    if seen < now then seen = now end
    local keep = seen / 1000 / half_life + math.log(imp) / math.log(2)
    redis.call('HSET', doc, 'last_accessed_at', now, 'access_count', n, 'keep', keep)
  end
  return n
end
"""

# KEYS: doc1, counter1, doc2, counter2, ... ; ARGV: reinforce (1/0), now_ms, half_life_s,
# interval_ms, field...
# -> per memory: nil when gone, else the fields' values (as read, before this access)
#    followed by the exact access count before this access.
FETCH = (
    _REINFORCE_FN
    + r"""
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
local now, half_life, interval = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local out = {}
for j = 1, #KEYS, 2 do
  local doc, counter = KEYS[j], KEYS[j + 1]
  if redis.call('EXISTS', doc) == 0 then
    out[#out + 1] = false
  else
    local values = {}
    if #fields > 0 then values = redis.call('HMGET', doc, unpack(fields)) end
    local count
    if ARGV[1] == '1' then
      count = reinforce(doc, counter, now, half_life, interval) - 1
    else
      local stored = tonumber(redis.call('HGET', doc, 'access_count')) or 0
      count = tonumber(redis.call('GET', counter)) or 0
      if count < stored then count = stored end
    end
    values[#values + 1] = count
    out[#out + 1] = values
  end
end
return out
"""
)

# KEYS: lock ; ARGV: token, ttl_ms -> 1 acquired (or already ours), 0 held by another
LOCK = r"""
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

# KEYS: lock ; ARGV: token -> 1 released, 0 not ours (expired or taken over)
UNLOCK = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

# KEYS: doc, history doc, counter ; ARGV: valid_until, superseded_by, retracted(0|1)
# -> 1 moved, 0 the document was already gone
RETIRE = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'valid_until', ARGV[1], 'superseded_by', ARGV[2], 'retracted', ARGV[3])
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('DEL', KEYS[3])
return 1
"""

# KEYS: doc, update history ; ARGV: ttl_ms (0: none), history entry ('' : none), history max,
# then the document's field/value pairs -> 1
REPLACE = r"""
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
local ttl = tonumber(ARGV[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
if ARGV[2] ~= '' then
  if redis.call('LINDEX', KEYS[2], 0) ~= ARGV[2] then
    redis.call('LPUSH', KEYS[2], ARGV[2])
    redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
  end
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) else redis.call('PERSIST', KEYS[2]) end
end
return 1
"""
