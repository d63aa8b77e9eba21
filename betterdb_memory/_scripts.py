"""Lua scripts of the write path. Each touches only keys of one scope (one hash slot).

Every script receives the document key prefix (``<name>:mem:``) and derives a
memory's document key from its id (``<tag>-<rand>`` -> ``<prefix>{<tag>}:<rand>``);
the derived keys share the declared keys' hash tag, so the scripts are legal in a
cluster. ``drop`` removes a memory with all its bookkeeping, so no path leaves an
orphan: forget, eviction, expiry sweeps and scope deletion all go through it.

Access statistics and the index. On RediSearch every write to a hash under the
index prefix re-indexes the whole document, HNSW vector included (measured: ~10 ms
per HSET at 5k memories, against ~1 ms for the search itself). So a recall's
reinforcement must not write the document every time: the exact access count lives
in the scope's ``access`` HASH (outside the index), and the document's
``last_accessed_at`` / ``access_count`` snapshot (what recency scoring reads) is
rewritten only when it is older than ``interval`` seconds. The store sets
``interval`` to a small fraction of the half-life, so the recency error this allows
is under one percent.
"""

from __future__ import annotations

__all__ = ["FORGET", "FORGET_PAGE", "REINFORCE", "WRITE"]

_COMMON = r"""
local created, keep, expiry, dedup, access = KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local prefix = ARGV[1]
local function dockey(mid)
  return prefix .. '{' .. string.sub(mid, 1, 20) .. '}:' .. string.sub(mid, 22)
end
local function keepscore(t, imp, hl)
  if imp < 0.001 then imp = 0.001 end
  return t / hl + math.log(imp) / math.log(2)
end
local function touch(dk, mid, now, hl, interval)
  -- One access: exact count in the access hash; document snapshot only when stale.
  local n = redis.call('HINCRBY', access, mid, 1)
  -- Follow the scope's bookkeeping lifetime (set when every memory has a TTL).
  local ttl = redis.call('PTTL', created)
  if ttl > 0 then redis.call('PEXPIRE', access, ttl) end
  local last = tonumber(redis.call('HGET', dk, 'last_accessed_at')) or 0
  if now - last >= interval then
    redis.call('HSET', dk, 'last_accessed_at', now, 'access_count', n)
    local imp = tonumber(redis.call('HGET', dk, 'importance')) or 0.5
    redis.call('ZADD', keep, 'XX', keepscore(now, imp, hl), mid)
  end
  return n
end
local function drop(mid)
  local dk = dockey(mid)
  local d = redis.call('HGET', dk, 'dedup')
  local existed = redis.call('UNLINK', dk)
  if d and d ~= '' and redis.call('HGET', dedup, d) == mid then
    redis.call('HDEL', dedup, d)
  end
  redis.call('ZREM', created, mid)
  redis.call('ZREM', keep, mid)
  redis.call('HDEL', access, mid)
  if d then redis.call('ZREM', expiry, mid .. '|' .. d) end
  redis.call('ZREM', expiry, mid .. '|')
  return existed
end
local function sweep(now)
  local expired = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, 100)
  for _, m in ipairs(expired) do
    local bar = string.find(m, '|', 1, true)
    local mid = string.sub(m, 1, bar - 1)
    local d = string.sub(m, bar + 1)
    redis.call('UNLINK', dockey(mid))
    redis.call('ZREM', created, mid)
    redis.call('ZREM', keep, mid)
    redis.call('HDEL', access, mid)
    redis.call('ZREM', expiry, m)
    if d ~= '' and redis.call('HGET', dedup, d) == mid then redis.call('HDEL', dedup, d) end
  end
end
"""

# KEYS: doc, created, keep, expiry, dedup, access
# ARGV: prefix, id, dedup_hash|'', cap|0, now, half_life, importance, ttl_ms|0, expires_at|'',
#       access_interval, field, value, ...
# Returns {id, reused(0|1), evicted_id...}
WRITE = (
    _COMMON
    + r"""
local id, dh = ARGV[2], ARGV[3]
local cap, now, hl, imp = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local ttl = tonumber(ARGV[8])
sweep(ARGV[5])
if dh ~= '' then
  local existing = redis.call('HGET', dedup, dh)
  if existing then
    local ek = dockey(existing)
    if redis.call('EXISTS', ek) == 1 then
      touch(ek, existing, now, hl, tonumber(ARGV[10]))
      return {existing, 1}
    end
    redis.call('HDEL', dedup, dh)
  end
end
local fields = {}
for i = 11, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('ZADD', expiry, ARGV[9], id .. '|' .. dh)
end
redis.call('ZADD', created, now, id)
redis.call('ZADD', keep, keepscore(now, imp, hl), id)
if dh ~= '' then redis.call('HSET', dedup, dh, id) end
-- When every memory of the scope has a TTL, the bookkeeping expires with the last of
-- them, so TTL expiry alone leaves nothing behind; otherwise it lives on.
local book = {created, keep, expiry, dedup, access}
if redis.call('ZCARD', created) == redis.call('ZCARD', expiry) then
  local last = redis.call('ZRANGE', expiry, -1, -1, 'WITHSCORES')
  local at = math.ceil(tonumber(last[2]) * 1000) + 50
  for _, k in ipairs(book) do redis.call('PEXPIREAT', k, at) end
else
  for _, k in ipairs(book) do redis.call('PERSIST', k) end
end
local out = {id, 0}
if cap > 0 then
  local n = redis.call('ZCARD', keep)
  while n > cap do
    local victims = redis.call('ZRANGE', keep, 0, 1)
    local v = victims[1]
    if v == id then v = victims[2] end
    if not v then break end
    drop(v)
    out[#out + 1] = v
    n = n - 1
  end
end
return out
"""
)

# KEYS: doc, created, keep, expiry, dedup, access ; ARGV: prefix, id  -> 1 if the document existed
FORGET = (
    _COMMON
    + r"""
return drop(ARGV[2])
"""
)

# KEYS: doc (unused, for routing), created, keep, expiry, dedup, access
# ARGV: prefix, start, page, now, tag_token...  (tokens: any-of filter on the doc's 'tags' field)
# Returns {deleted (documents that existed), removed (bookkeeping entries), scanned}
FORGET_PAGE = (
    _COMMON
    + r"""
sweep(ARGV[4])
local start, page = tonumber(ARGV[2]), tonumber(ARGV[3])
local ids = redis.call('ZRANGE', created, start, start + page - 1)
local deleted, removed = 0, 0
for _, mid in ipairs(ids) do
  local match = true
  if #ARGV > 4 then
    match = false
    local tags = redis.call('HGET', dockey(mid), 'tags')
    if tags then
      local padded = ',' .. tags .. ','
      for i = 5, #ARGV do
        if string.find(padded, ',' .. ARGV[i] .. ',', 1, true) then match = true break end
      end
    end
  end
  if match then
    deleted = deleted + drop(mid)
    removed = removed + 1
  end
end
return {deleted, removed, #ids}
"""
)

# KEYS: doc, created, keep, expiry, dedup, access ; ARGV: prefix, id, now, half_life, interval
# -> the exact access count after this access, or -1 when the memory is gone
REINFORCE = (
    _COMMON
    + r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return touch(KEYS[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))
"""
)
