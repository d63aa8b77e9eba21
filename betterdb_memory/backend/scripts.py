"""Every Lua script of the package, as ``Script`` values: one registry, loaded together.

No other module holds Lua but ``scripts_subjects`` and ``scripts_reinforce`` (the
subjects' and the reinforcement's blocks, in ``ALL`` here). A part runs a script by putting ``SCRIPT.call(keys, args)`` in the commands it
hands the backend; the backend sends a plain ``EVALSHA`` and, on
``NOSCRIPT``, loads ``ALL`` and sends the round trip again. Each script touches the
keys of one hash slot (``ACCESS``, ``FLUSH``: see ``scripts_reinforce``). The sessions' scripts (``APPEND_TURN``
...) and the transcripts' (``TRANSCRIPT_*``) are described beside their sources.

The long-term tier:

Writes are plain commands (one ``HSET`` per memory, ``PEXPIRE`` after it when the
memory has a TTL, and the ``expires_at`` field that readers check, so a lost
``PEXPIRE`` can never make an expired memory visible). Scripts remain only where a
read must decide a write atomically:

Reading memories by id and reinforcing them (``ACCESS``, ``PEND``, ``FLUSH``,
``SETTLE``) live in ``backend.scripts_reinforce``, registered here.

``RETIRE`` (a superseded or retracted fact): stamps the document and renames it out
of the index prefix to its history key (the same slot), only if it still exists, so
a fact another client deleted meanwhile never leaves a stub behind.

``REPLACE`` (an upsert by a caller's id): the old document is deleted and the new one
written in one step, so no reader sees a half-replaced memory and no field of the old
version survives; the replaced version goes to the front of the memory's update
history (kept to a bound, with the document's TTL), unless a replay already put it there.

``SUBJECT_PUT`` / ``SUBJECT_DROP`` / ``SUBJECT_TRIM`` (subjects): which version of a subject is current,
decided on the subject's own slot; their sources are in ``scripts_subjects`` (re-exported here).

``HISTORY_MARK`` (sent before a version moves to history): raises the bound the meta
hash's ``history`` field keeps on past versions' ``valid_until`` (``core.history_mark``),
an atomic max.

``LOCK`` / ``UNLOCK``: a token lock that is safe to replay (a retried acquire whose
first reply was lost finds its own token and succeeds) and released only by its owner.
"""

from __future__ import annotations

from ..core import history_mark
from .commands import Script, ScriptCall
from .scripts_reinforce import SCRIPTS as _REINFORCE
from .scripts_subjects import SUBJECT_DROP, SUBJECT_PUT, SUBJECT_TRIM

__all__ = [
    "ALL",
    "APPEND_TURN",
    "ERASE_SESSION",
    "HISTORY_MARK",
    "LOCK",
    "PENDING_TURNS",
    "REEMBED_SWAP",
    "REPLACE",
    "RETIRE",
    "SESSION_SNAPSHOT",
    "SUBJECT_DROP",
    "SUBJECT_PUT",
    "SUBJECT_TRIM",
    "SUMMARY_ADVANCE",
    "SUMMARY_FAILED",
    "TRANSCRIPT_ADVANCE",
    "TRANSCRIPT_APPEND",
    "TRANSCRIPT_POP",
    "UNLOCK",
    "mark_history",
]

# KEYS: lock ; ARGV: token, ttl_ms -> 1 acquired (or already ours), 0 held by another
_LOCK = r"""
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
_UNLOCK = r"""
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

# KEYS: doc, history doc, counter ; ARGV: valid_until, superseded_by, retracted(0|1)
# -> 1 moved, 0 the document was already gone. An earlier end already stamped on the
# document (a subject's SUBJECT_TRIM that arrived first) is kept, with its successor.
_RETIRE = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local ends = tonumber(redis.call('HGET', KEYS[1], 'valid_until') or '')
if ends and ends <= tonumber(ARGV[1]) then
  redis.call('HSET', KEYS[1], 'retracted', ARGV[3])
else
  redis.call('HSET', KEYS[1], 'valid_until', ARGV[1], 'superseded_by', ARGV[2], 'retracted', ARGV[3])
end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('DEL', KEYS[3])
return 1
"""

# KEYS: doc, update history ; ARGV: ttl_ms (0: none), history entry ('' : none), history max,
# then the document's field/value pairs -> 1
_REPLACE = r"""
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

# -- L1 sessions (tiers.sessions, tiers.summaries) ------------------------------------------

# KEYS: turns, meta, cursor
# ARGV: turn_json (without "ts"), now, ttl_ms, window, batch (0 = no summaries), cap (max turns held)
# Returns {seq, pending}: pending = turns older than the window not yet summarised.
# The turn's time is fixed here, where its order is: the caller's clock, but never earlier
# than the session's last turn, so a session's turns are in the order of their timestamps
# even when many clients append at once (each read its clock before its round trip, and
# the server orders them as they arrive). Not the server's TIME: the documented
# least-privilege ACL grants no TIME, and a denied call inside a script fails the append.
_APPEND_TURN = r"""
local turns, meta, ckey = KEYS[1], KEYS[2], KEYS[3]
local ttl = tonumber(ARGV[3])
local window, batch, cap = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local now = ARGV[2]
local last = redis.call('HGET', meta, 'last_active')
if last and tonumber(last) and tonumber(last) > tonumber(now) then now = last end
local n = redis.call('HINCRBY', meta, 'turn_count', 1)
redis.call('RPUSH', turns, '{"seq":' .. n .. ',"ts":' .. now .. ',' .. string.sub(ARGV[1], 2))
redis.call('HSETNX', meta, 'created_at', now)
redis.call('HSET', meta, 'last_active', now)
local first = n - redis.call('LLEN', turns) + 1
local cursor = tonumber(redis.call('GET', ckey) or '0')
local keep_from
if batch <= 0 then
  keep_from = n - window + 1
else
  keep_from = math.min(cursor, n - window) + 1
  if n - keep_from + 1 > cap then
    local new_from = n - cap + 1
    local lost = new_from - 1 - cursor
    if lost > 0 then
      redis.call('HINCRBY', meta, 'dropped', lost)
      cursor = new_from - 1
      redis.call('SET', ckey, cursor)
    end
    keep_from = new_from
  end
end
if keep_from > first then redis.call('LTRIM', turns, keep_from - first, -1) end
redis.call('PEXPIRE', turns, ttl)
redis.call('PEXPIRE', meta, ttl)
redis.call('PEXPIRE', ckey, ttl)
return {n, n - window - cursor}
"""

# KEYS: turns, meta, cursor ; ARGV: through (last seq summarised), window
# Advances the cursor (never backwards) and trims what it frees. -1 when the session is gone
# (cleared or erased while the summary was being written): nothing is recreated.
_SUMMARY_ADVANCE = r"""
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local cursor = tonumber(redis.call('GET', KEYS[3]) or '0')
local through, window = tonumber(ARGV[1]), tonumber(ARGV[2])
if through > cursor then
  cursor = through
  local pttl = redis.call('PTTL', KEYS[2])
  if pttl > 0 then redis.call('SET', KEYS[3], cursor, 'PX', pttl) else redis.call('SET', KEYS[3], cursor) end
end
local n = tonumber(redis.call('HGET', KEYS[2], 'turn_count') or '0')
local first = n - redis.call('LLEN', KEYS[1]) + 1
local keep_from = math.min(cursor, n - window) + 1
if keep_from > first then redis.call('LTRIM', KEYS[1], keep_from - first, -1) end
return cursor
"""

# KEYS: meta -> new failure count, or -1 when the session is gone
_SUMMARY_FAILED = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('HINCRBY', KEYS[1], 'summary_failures', 1)
"""

# KEYS: meta, turns, cursor -> {HGETALL meta (flat), LLEN turns, cursor or nil}
# A consistent snapshot of the session's counters in one call: a script rather than
# MULTI/EXEC, which valkey-py's cluster client does not offer.
_SESSION_SNAPSHOT = r"""
return {redis.call('HGETALL', KEYS[1]), redis.call('LLEN', KEYS[2]), redis.call('GET', KEYS[3])}
"""

# KEYS: turns, cursor ; ARGV: window -> {cursor or nil, the turns older than the window, oldest first}
_PENDING_TURNS = r"""
return {redis.call('GET', KEYS[2]), redis.call('LRANGE', KEYS[1], 0, -(tonumber(ARGV[1]) + 1))}
"""

# KEYS: turns, then every other key of the session -> number of turns the session held
_ERASE_SESSION = r"""
local n = redis.call('LLEN', KEYS[1])
redis.call('DEL', unpack(KEYS))
return n
"""

# -- re-embedding (transfer.reembed) -----------------------------------------------------

# KEYS: pairs of a document (or history document) and its side key -> per pair: 1 moved,
# 0 nothing to move (no side vector, or the document is gone: the side key is dropped),
# -1 the content changed since the side vector was made (left for the caller to embed
# again). On one server a whole SCAN batch is one call (the switch's gap is mostly client
# time per command: 100k single-pair calls took 10.9 s, see README); on a cluster each
# call holds one pair, whose keys share a slot.
_REEMBED_SWAP = r"""
local out = {}
for i = 1, #KEYS, 2 do
  local doc, side = KEYS[i], KEYS[i + 1]
  local v = redis.call('HGET', side, 'v')
  local r = 0
  if v then
    if redis.call('EXISTS', doc) == 0 then
      redis.call('DEL', side)
    elseif redis.sha1hex(redis.call('HGET', doc, 'content') or '') ~= redis.call('HGET', side, 'h') then
      r = -1
    else
      redis.call('HSET', doc, 'vector', v)
      redis.call('DEL', side)
      r = 1
    end
  end
  out[#out + 1] = r
end
return out
"""

# Index switch (``backend.index_switch``). INDEX_SWITCH: compare-and-set on the meta's ``index_gen``
# (ARGV gen, index, gen+1, digest, pairs). INDEX_BACKFILL: ARGV n, n pairs, deletes; never a stub.
_INDEX_SWITCH = r"""
if (redis.call('HGET', KEYS[1], 'index_gen') or '0') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'index', ARGV[2], 'index_gen', ARGV[3], 'index_schema', ARGV[4], unpack(ARGV, 5))
return 1"""
_INDEX_BACKFILL = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n = tonumber(ARGV[1])
if n > 0 then redis.call('HSET', KEYS[1], unpack(ARGV, 2, 1 + 2 * n)) end
if #ARGV > 1 + 2 * n then redis.call('HDEL', KEYS[1], unpack(ARGV, 2 + 2 * n)) end
return 1"""

# The transcripts of the framework adapters (``tiers.transcripts``): a LIST of raw items
# (an OpenAI Agents session's items, a LangChain history's messages) and a mark of how
# many of them are folded into L1 turns.

# KEYS: items, folded. ARGV: ttl_ms, item... -> {length, folded, items after folded}
_TRANSCRIPT_APPEND = """
for i = 2, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local folded = tonumber(redis.call('GET', KEYS[2]) or '0')
if folded > 0 then redis.call('PEXPIRE', KEYS[2], ARGV[1]) end
return {redis.call('LLEN', KEYS[1]), folded, redis.call('LRANGE', KEYS[1], folded, -1)}
"""

# KEYS: folded. ARGV: expected, new, ttl_ms -> 1 when this caller moved the mark, else 0.
# Whoever moves the mark stores those turns, so two writers never store a turn twice.
_TRANSCRIPT_ADVANCE = """
if tonumber(redis.call('GET', KEYS[1]) or '0') ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""

# KEYS: items, folded -> the last item (nil when empty); the mark never points past the end.
_TRANSCRIPT_POP = """
local last = redis.call('LRANGE', KEYS[1], -1, -1)
if #last == 0 then return false end
redis.call('LTRIM', KEYS[1], 0, -2)
local n = redis.call('LLEN', KEYS[1])
if tonumber(redis.call('GET', KEYS[2]) or '0') > n then redis.call('SET', KEYS[2], n, 'KEEPTTL') end
return last[1]
"""


# KEYS: meta ; ARGV: the moved versions' latest valid_until (epoch ms), "" (unknown), or
# "?" (opening a store whose history index holds documents: "1" unless the field says so
# already) -> 1 when the field changed. The meta field's values: ``core.history_mark``.
_HISTORY_MARK = r"""
local v = redis.call('HGET', KEYS[1], 'history')
if v == '1' then return 0 end
local bound = v and tonumber(string.match(v, '^u(%-?%d+)$'))
if ARGV[1] == '?' then
  if bound then return 0 end
  redis.call('HSET', KEYS[1], 'history', '1')
  return 1
end
if ARGV[1] == '' then
  redis.call('HSET', KEYS[1], 'history', '1')
  return 1
end
if bound and bound >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'history', 'u' .. ARGV[1])
return 1
"""


# -- the registry ------------------------------------------------------------------------

LOCK = Script.of("lock", _LOCK)
UNLOCK = Script.of("unlock", _UNLOCK)
RETIRE = Script.of("retire", _RETIRE)
REPLACE = Script.of("replace", _REPLACE)
APPEND_TURN = Script.of("append_turn", _APPEND_TURN)
SUMMARY_ADVANCE = Script.of("summary_advance", _SUMMARY_ADVANCE)
SUMMARY_FAILED = Script.of("summary_failed", _SUMMARY_FAILED)
SESSION_SNAPSHOT = Script.of("session_snapshot", _SESSION_SNAPSHOT)
PENDING_TURNS = Script.of("pending_turns", _PENDING_TURNS)
ERASE_SESSION = Script.of("erase_session", _ERASE_SESSION)
REEMBED_SWAP = Script.of("reembed_swap", _REEMBED_SWAP)
INDEX_SWITCH = Script.of("index_switch", _INDEX_SWITCH)
INDEX_BACKFILL = Script.of("index_backfill", _INDEX_BACKFILL)
TRANSCRIPT_APPEND = Script.of("transcript_append", _TRANSCRIPT_APPEND)
TRANSCRIPT_ADVANCE = Script.of("transcript_advance", _TRANSCRIPT_ADVANCE)
TRANSCRIPT_POP = Script.of("transcript_pop", _TRANSCRIPT_POP)
HISTORY_MARK = Script.of("history_mark", _HISTORY_MARK)

#: Every script of the package: loaded together on ``NOSCRIPT`` (a restart, ``SCRIPT FLUSH``, a new primary).
ALL: tuple[Script, ...] = (
    *_REINFORCE,
    LOCK,
    UNLOCK,
    RETIRE,
    REPLACE,
    APPEND_TURN,
    SUMMARY_ADVANCE,
    SUMMARY_FAILED,
    SESSION_SNAPSHOT,
    PENDING_TURNS,
    ERASE_SESSION,
    REEMBED_SWAP,
    INDEX_SWITCH,
    INDEX_BACKFILL,
    TRANSCRIPT_APPEND,
    TRANSCRIPT_ADVANCE,
    TRANSCRIPT_POP,
    SUBJECT_PUT,
    SUBJECT_DROP,
    SUBJECT_TRIM,
    HISTORY_MARK,
)


def mark_history(meta_key: str, until: int | None) -> ScriptCall:
    """``HISTORY_MARK`` before moving versions whose latest ``valid_until`` is ``until`` (None: unknown)."""
    return HISTORY_MARK.call([meta_key], history_mark.mark_args(until))
