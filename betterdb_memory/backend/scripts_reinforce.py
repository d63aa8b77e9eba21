"""The reinforcement's Lua scripts: exact counts beside the document, snapshots after a bounded lag.

Registered in ``scripts.ALL`` with the others (loaded together on ``NOSCRIPT``).

Why a lag: on RediSearch every write to a hash under the index prefix re-indexes the
whole document, HNSW vector included (an order of magnitude more than the search itself:
``bench/results/profile.md``). A recall that rewrote each hit's document paid that per
hit, and each memory's *first* access always did. So a recall writes nothing the index
watches:

* the exact access count goes to the memory's counter key ``<name>:acc:{<doc key>}``
  (its document's slot), as before;
* the exact time of its last access goes to the store's pending HASH
  ``<name>:__mem_pending_access`` (field: the document key, value: epoch ms, only ever raised),
  which doubles as the list of documents whose snapshot is behind.

``get`` reads the document, its counter and its pending time: exact. A flush
(``tiers.reinforce``) writes each pending document's ``last_accessed_at`` /
``access_count`` / ``keep`` snapshot (what BetterDB Monitor, the reference library and
ranking read) at most once per ``reinforce_write_interval``, then removes the entry
unless an access raised it meanwhile. An entry survives a crash of the process that
wrote it (it is on the server), so any later flush, of any store over the same name,
writes it. ``interval`` 0 keeps the old write-through: the recall's script writes the
snapshot itself and nothing is pending.

``ACCESS`` (memories by id, and their reinforcement): each document's fields with its
exact access count and last access, read in one step; with ``reinforce`` 1 it also
counts an access. A deleted memory is never resurrected: each document is checked first
(a gone one reads as nil). On a single server one call reads many memories and takes the
pending HASH as its last key; on a cluster one call per memory (its two keys share a
slot) and the pending HASH, on its own slot, is read and raised by ``PEND`` (read alone,
``HMGET``, when not reinforcing) beside them in the same round trip. Both scripts keep
their server calls few (each counts in ``INFO commandstats`` and costs a dispatch on a
recall's hot path): per memory, one HMGET, INCR (or GET) and PTTL; per recall, one HMGET
and one HSET of the pending HASH. Not batched per node: a cluster script may name keys of
one slot only (``allow-cross-slot-keys`` reaches undeclared keys of other slots, which a
slot migration or a stale slot map turns into errors for the whole batch).
"""

from __future__ import annotations

from .commands import Script

__all__ = ["ACCESS", "FLUSH", "PEND", "SCRIPTS", "SETTLE"]

# The document's access snapshot: count, time, and the eviction score ``keep`` derived from them.
_SNAPSHOT_FN = r"""
local function snapshot(doc, n, at, half_life)
  local imp = tonumber(redis.call('HGET', doc, 'importance')) or 0.5
  if imp < 0.001 then imp = 0.001 end
  -- Recency counts from the later of the access and valid_from (a plan dated ahead).
  local seen = tonumber(redis.call('HGET', doc, 'valid_from')) or at
  if seen < at then seen = at end
  local keep = seen / 1000 / half_life + math.log(imp) / math.log(2)
  redis.call('HSET', doc, 'last_accessed_at', at, 'access_count', n, 'keep', keep)
end
"""

# KEYS: doc1, counter1, doc2, counter2, ..., then the pending HASH (single server only: the
# key count is odd) ; ARGV: reinforce (1/0), now_ms, half_life_s, interval_ms, field...
# -> per memory: nil when gone, else the fields' values (as read, before this access),
#    the exact access count and the exact last access (epoch ms, 0: never), both before it.
# Few server calls per memory (each is counted and costs a dispatch, on a recall's hot path):
# one HMGET reads the fields and the snapshot; EXISTS only when it found none of them;
# INCR's answer gives the count before it (GET only when not reinforcing). The pending
# HASH is read once (HMGET) and raised once (HSET) per call.
_ACCESS = (
    _SNAPSHOT_FN
    + r"""
local fields = {'access_count', 'last_accessed_at'}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
local now, half_life, interval = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local n = #KEYS
local pending = false
if n % 2 == 1 then pending = KEYS[n]; n = n - 1 end
local marks, raise = {}, {}
if pending then
  local docs = {}
  for j = 1, n, 2 do docs[#docs + 1] = KEYS[j] end
  if #docs > 0 then marks = redis.call('HMGET', pending, unpack(docs)) end
end
local out = {}
for j = 1, n, 2 do
  local doc, counter = KEYS[j], KEYS[j + 1]
  local got = redis.call('HMGET', doc, unpack(fields))
  local found = false
  for i = 1, #fields do if got[i] then found = true; break end end
  if not found then found = redis.call('EXISTS', doc) == 1 end
  if not found then
    out[#out + 1] = false
  else
    local values = {}
    for i = 3, #fields do values[#values + 1] = got[i] end
    -- The counter is missing (no access through this library yet) or lost: the
    -- document's own count (another client's, or a snapshot) is the floor.
    local stored = tonumber(got[1]) or 0
    local last = tonumber(got[2]) or 0
    local marked = tonumber(marks[(j + 1) / 2]) or 0
    local count
    if ARGV[1] == '1' then
      local m = redis.call('INCR', counter)
      count = m - 1
      if count < stored then count = stored end
      if m <= count then
        m = count + 1
        redis.call('SET', counter, m, 'KEEPTTL')
      end
      local ttl = redis.call('PTTL', doc)
      if ttl > 0 then redis.call('PEXPIRE', counter, ttl) end
      if interval <= 0 then
        snapshot(doc, m, math.max(now, last), half_life)  -- write-through
      elseif pending and now > marked then
        raise[#raise + 1] = doc
        raise[#raise + 1] = ARGV[2]
      end
    else
      count = tonumber(redis.call('GET', counter)) or 0
      if count < stored then count = stored end
    end
    if last < marked then last = marked end
    values[#values + 1] = count
    values[#values + 1] = last
    out[#out + 1] = values
  end
end
if #raise > 0 then redis.call('HSET', pending, unpack(raise)) end
return out
"""
)

# KEYS: pending ; ARGV: now_ms, doc key... -> each document's pending time before this call
# (HMGET's answer: nil when none). Raises each to now, in one HSET (a cluster's recall: its
# ACCESS calls cannot reach this key's slot).
_PEND = r"""
local now = tonumber(ARGV[1])
local docs = {}
for i = 2, #ARGV do docs[#docs + 1] = ARGV[i] end
local before = redis.call('HMGET', KEYS[1], unpack(docs))
local raise = {}
for i = 1, #docs do
  if (tonumber(before[i]) or 0) < now then
    raise[#raise + 1] = docs[i]
    raise[#raise + 1] = ARGV[1]
  end
end
if #raise > 0 then redis.call('HSET', KEYS[1], unpack(raise)) end
return before
"""

# KEYS: doc1, counter1, ... ; ARGV: half_life_s, then each document's pending time (ms)
# -> per document: -1 gone, 0 its snapshot was current, 1 written.
# The snapshot is exact when written: the counter, and the later of the pending time and
# the document's own. A current snapshot is not rewritten (no re-index).
_FLUSH = (
    _SNAPSHOT_FN
    + r"""
local half_life = tonumber(ARGV[1])
local out = {}
for j = 1, #KEYS, 2 do
  local doc, counter = KEYS[j], KEYS[j + 1]
  local at = tonumber(ARGV[(j + 1) / 2 + 1]) or 0
  if redis.call('EXISTS', doc) == 0 then
    out[#out + 1] = -1
  else
    local stored = tonumber(redis.call('HGET', doc, 'access_count')) or 0
    local last = tonumber(redis.call('HGET', doc, 'last_accessed_at')) or 0
    local n = tonumber(redis.call('GET', counter)) or 0
    if n < stored then n = stored end
    if at < last then at = last end
    if n == stored and at == last then
      out[#out + 1] = 0
    else
      snapshot(doc, n, at, half_life)
      out[#out + 1] = 1
    end
  end
end
return out
"""
)

# KEYS: pending ; ARGV: field1, value1, field2, value2, ... -> entries removed.
# Removes an entry only if it still holds the value the flush wrote from: an access since
# raised it, and the next flush writes that one.
_SETTLE = r"""
local removed = 0
for i = 1, #ARGV, 2 do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[1], ARGV[i])
    removed = removed + 1
  end
end
return removed
"""

ACCESS = Script.of("access", _ACCESS)
PEND = Script.of("pend", _PEND)
FLUSH = Script.of("flush", _FLUSH)
SETTLE = Script.of("settle", _SETTLE)

#: This module's scripts (part of ``scripts.ALL``).
SCRIPTS: tuple[Script, ...] = (ACCESS, PEND, FLUSH, SETTLE)
