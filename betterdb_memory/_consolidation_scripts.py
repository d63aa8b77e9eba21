"""Lua scripts of consolidation. Each touches the keys of one target scope (one hash slot).

Key layout of a target scope ``{T}`` (all in T's slot, beside ``_scripts``' keys)::

    <name>:mem:{T}:<rand>                    a live fact (an ordinary, indexed memory)
    <name>:hist:{T}:<rand>                   a superseded or retracted fact: the same
                                             HASH renamed out of the index prefix, so
                                             recall cannot return it, at no query cost
    <name>:scope:{T}:facts                   HASH  normalised subject -> live fact id
    <name>:scope:{T}:facts:subjects          HASH  subject digest -> normalised subject
    <name>:scope:{T}:facts:hist:<digest>     ZSET  every fact id of a subject, by record time
    <name>:scope:{T}:consolidated:<mode>     ZSET  source ids already consolidated
    <name>:scope:{T}:consolidate:lock        STRING  the run lock (token, PX)

Document keys are derived in-script from an id and a prefix, as ``_scripts`` does;
the derived keys carry the declared keys' hash tag, so the scripts are cluster-legal.
"""

from __future__ import annotations

__all__ = [
    "COMMIT_FACTS",
    "CREATED_PAGE",
    "LOCK_ACQUIRE",
    "LOCK_EXTEND",
    "LOCK_RELEASE",
    "PURGE_HISTORY",
    "READ_DOCS",
]

# KEYS: lock ; ARGV: token, ttl_ms -> 1 when held by token (also on a replay), else 0.
# A replay after a dropped connection finds its own token and keeps the lock, which a
# bare SET NX would misread as "someone else holds it".
LOCK_ACQUIRE = r"""
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

# KEYS: lock ; ARGV: token, ttl_ms -> 1 when still held (and extended), 0 when lost.
LOCK_EXTEND = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

# KEYS: lock ; ARGV: token -> 1 when released; never deletes another holder's lock.
LOCK_RELEASE = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: created ; ARGV: hi ('+inf' or '(<score>'), after_member|'', after_score|'-inf', count, extra
# Returns {exact(1|0), member, score, member, score, ...} oldest first, strictly after the
# cursor (after_score, after_member). Ties in score are common (remember_many stamps a
# whole batch with one time), so a score cursor alone cannot resume inside a tie; the
# member's rank can, in O(log n). If the member vanished meanwhile, fall back to the
# score (inclusive), reading `extra` more rows, and return exact=0: the caller skips the
# tie members it already saw (`extra` of them).
CREATED_PAGE = r"""
local key, hi, after, lo = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local count, extra = tonumber(ARGV[4]), tonumber(ARGV[5])
local rows
local exact = 1
if after ~= '' then
  local r = redis.call('ZRANK', key, after)
  if r then
    rows = redis.call('ZRANGE', key, r + 1, r + count, 'WITHSCORES')
  else
    exact = 0
    rows = redis.call('ZRANGE', key, lo, hi, 'BYSCORE', 'LIMIT', 0, count + extra, 'WITHSCORES')
  end
else
  rows = redis.call('ZRANGE', key, lo, hi, 'BYSCORE', 'LIMIT', 0, count, 'WITHSCORES')
end
local out = {exact}
for i = 1, #rows do out[#out + 1] = rows[i] end
return out
"""

# KEYS: documents of one scope ; ARGV: field names -> per key a JSON object of the fields
# present, or '' when the document is gone. One bulk string per document instead of one
# per field: the client parses a 1,000-document page about three times faster, which is
# what a whole-scope consolidation spends its time on (values are valid UTF-8, so the
# JSON is valid).
READ_DOCS = r"""
local out = {}
for i, k in ipairs(KEYS) do
  local vals = redis.call('HMGET', k, unpack(ARGV))
  if vals[1] then
    local t = {}
    for j, f in ipairs(ARGV) do
      if vals[j] then t[f] = vals[j] end
    end
    out[i] = cjson.encode(t)
  else
    out[i] = ''
  end
end
return out
"""

# KEYS: facts, subjects, created, keep, expiry, dedup, consumed   (all in {T})
# ARGV: mem_prefix, hist_prefix, hist_base ('<name>:scope:{T}:facts:hist:'), now, now_iso,
#       n_ops, n_consumed,
#       then per op 6 values: action ('put'|'del'), subject_key, digest, expected|'',
#                             new_id|'', valid_until_iso|''
#       then n_consumed source ids.
# Returns one status per op:
#   created | superseded | retracted | same | conflict | missing | gone
# Replay-safe (a retry after a dropped connection reports what the first attempt did),
# so the client may retry it like any idempotent write.
COMMIT_FACTS = r"""
local facts, subjects, created, keep, expiry, dedup, consumed =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local mem, hist, hbase, now, now_iso = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local n_ops, n_consumed = tonumber(ARGV[6]), tonumber(ARGV[7])
local function key_of(prefix, mid)
  return prefix .. '{' .. string.sub(mid, 1, 20) .. '}:' .. string.sub(mid, 22)
end
local function live(mid)
  return mid and mid ~= '' and redis.call('EXISTS', key_of(mem, mid)) == 1
end
local function subject_of(mid)
  local raw = redis.call('HGET', key_of(mem, mid), 'metadata')
  if not raw then return nil end
  local ok, meta = pcall(cjson.decode, raw)
  if ok and type(meta) == 'table' then return meta['subject_key'] end
  return nil
end
local function unbook(mid, d)
  if d and d ~= '' and redis.call('HGET', dedup, d) == mid then redis.call('HDEL', dedup, d) end
  redis.call('ZREM', created, mid)
  redis.call('ZREM', keep, mid)
  if d then redis.call('ZREM', expiry, mid .. '|' .. d) end
  redis.call('ZREM', expiry, mid .. '|')
end
local function drop(mid)
  local dk = key_of(mem, mid)
  unbook(mid, redis.call('HGET', dk, 'dedup'))
  redis.call('UNLINK', dk)
end
-- Move a live fact out of the index into history, with the same bookkeeping removal
-- as _scripts' drop(): count/list/eviction must never see it again.
local function retire(mid, by, until_iso, retracted)
  local dk = key_of(mem, mid)
  unbook(mid, redis.call('HGET', dk, 'dedup'))
  local hk = key_of(hist, mid)
  redis.call('RENAME', dk, hk)
  redis.call('PERSIST', hk)
  if until_iso == '' then until_iso = now_iso end
  redis.call('HSET', hk, 'superseded_by', by, 'valid_until', until_iso, 'retracted', retracted,
    'retired_at', now)
end
local function hist_field(mid, field)
  if mid == '' then return nil end
  return redis.call('HGET', key_of(hist, mid), field)
end
local out = {}
local base = 8
for i = 0, n_ops - 1 do
  local o = base + i * 6
  local action, skey, digest = ARGV[o], ARGV[o + 1], ARGV[o + 2]
  local expected, new_id, until_iso = ARGV[o + 3], ARGV[o + 4], ARGV[o + 5]
  local cur = redis.call('HGET', facts, skey)
  if cur and not live(cur) then cur = false end
  local status
  if action == 'put' then
    if cur and cur == new_id then
      -- Applied already (a replay), or the dedup of remember returned the live fact.
      if expected ~= '' and hist_field(expected, 'superseded_by') == new_id then
        status = 'superseded'
      elseif expected == new_id then
        status = 'same'
      else
        status = 'created'
      end
    elseif cur and cur ~= expected then
      -- Someone else changed this subject since the plan was made: leave it alone, and
      -- drop the unlinked document just written for it (never another subject's fact).
      if new_id ~= '' and live(new_id) and subject_of(new_id) == skey then drop(new_id) end
      status = 'conflict'
    elseif not live(new_id) or subject_of(new_id) ~= skey then
      status = 'missing'
    else
      if cur then
        retire(cur, new_id, until_iso, '0')
        status = 'superseded'
      else
        status = 'created'
      end
      redis.call('HSET', facts, skey, new_id)
      redis.call('HSET', subjects, digest, skey)
      -- History order is a per-subject sequence, not a time: one commit can record
      -- several statements of a subject within the same second.
      local hkey = hbase .. digest
      local top = redis.call('ZRANGE', hkey, -1, -1, 'WITHSCORES')
      redis.call('ZADD', hkey, (tonumber(top[2]) or 0) + 1, new_id)
    end
  else
    if not cur then
      if expected ~= '' and hist_field(expected, 'retracted') == '1' then
        status = 'retracted'
      else
        status = 'gone'
      end
    elseif cur ~= expected then
      status = 'conflict'
    else
      retire(cur, '', until_iso, '1')
      redis.call('HDEL', facts, skey)
      status = 'retracted'
    end
  end
  out[#out + 1] = status
end
local c = base + n_ops * 6
for i = 0, n_consumed - 1 do
  redis.call('ZADD', consumed, now, ARGV[c + i])
end
return out
"""

# KEYS: facts:hist:<digest>, subjects ; ARGV: mem_prefix, hist_prefix, digest, start, page
# Deletes the history documents among `page` entries from rank `start` of one subject;
# keeps live facts' entries (the caller advances `start` by `kept`).
# Returns {deleted, scanned, kept}.
PURGE_HISTORY = r"""
local hkey, subjects = KEYS[1], KEYS[2]
local mem, hist, digest = ARGV[1], ARGV[2], ARGV[3]
local start, page = tonumber(ARGV[4]), tonumber(ARGV[5])
local function key_of(prefix, mid)
  return prefix .. '{' .. string.sub(mid, 1, 20) .. '}:' .. string.sub(mid, 22)
end
local ids = redis.call('ZRANGE', hkey, start, start + page - 1)
local deleted, kept = 0, 0
for _, mid in ipairs(ids) do
  if redis.call('EXISTS', key_of(mem, mid)) == 1 then
    kept = kept + 1
  else
    deleted = deleted + redis.call('UNLINK', key_of(hist, mid))
    redis.call('ZREM', hkey, mid)
  end
end
if redis.call('ZCARD', hkey) == 0 then redis.call('HDEL', subjects, digest) end
return {deleted, #ids, kept}
"""
