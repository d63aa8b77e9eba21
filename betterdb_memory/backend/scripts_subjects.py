"""The subjects' Lua scripts (``tiers.subjects``): at most one current version per subject.

Registered with every other script in ``backend.scripts.ALL`` (loaded together on
``NOSCRIPT``); kept apart only to hold the registry's module to its size. The pointer
HASH ``<name>:subj:{D}`` and the version ZSET ``<name>:subj:{D}:hist`` (member: the
version's id, score: its ``valid_from``) share the digest's slot, so one call decides
atomically which version is current; concurrent writers of a subject serialise here.

The rule they keep (docs/concepts/time.md): at every instant at most one version of a
subject is valid. Versions follow each other by ``valid_from``; of two with the same
``valid_from`` the later write wins (the earlier one is then valid at no instant). The
current version is the latest one; with none current (it was forgotten, retracted or
vanished), a write becomes current only when no remaining version valid at some instant
starts after it (a tie's loser, valid at no instant, does not count). A correction
(consolidation's statement after a retraction of its subject) is current from its
``valid_from``; every other version starting at or after it is then valid at no instant.
"""

from __future__ import annotations

from .commands import Script

__all__ = ["SUBJECT_DROP", "SUBJECT_PUT", "SUBJECT_TRIM"]

# KEYS: pointer, versions ; ARGV: id, valid_from, subject, scope json, kind[, "1": a correction]
# -> {"current"|"past", replaced id or "", pointer's current id or "", ZRANGE versions WITHSCORES}
# A write not older than the current version becomes current (a later write of the same
# instant wins); an older one is a past version. With no current version, a write becomes
# current unless another version valid at some instant starts after it (it then fills a
# past gap). A tie's earlier versions are marked ``void:<id>`` in the pointer, the value
# naming the version that ended them (valid at no instant: they never keep an older write
# from being current; a repair ends their history documents where they began). A correction (a fact that
# follows a retraction of its subject in one consolidation plan) becomes current whatever
# its date: every other version starting at or after it is void. Replaying a call is
# harmless: the id is already listed, so it is decided as a plain write (already current:
# nothing replaced; or past again) and voids nothing.
# Only commands of the least-privilege ACL (core.acl): ZMSCORE, not ZSCORE; HGET, not HEXISTS.
_SUBJECT_PUT = r"""
local id, vf = ARGV[1], tonumber(ARGV[2])
local cur = redis.call('HGET', KEYS[1], 'current')
local cur_vf = tonumber(redis.call('HGET', KEYS[1], 'valid_from') or '')
local correct = false
if not redis.call('ZMSCORE', KEYS[2], id)[1] then
  correct = ARGV[6] == '1'
  local upto = correct and '+inf' or ARGV[2]
  for _, m in ipairs(redis.call('ZRANGE', KEYS[2], ARGV[2], upto, 'BYSCORE')) do
    redis.call('HSET', KEYS[1], 'void:' .. m, id)
  end
end
local latest = nil
local top = redis.call('ZRANGE', KEYS[2], 0, 31, 'REV', 'WITHSCORES')
for i = 1, #top, 2 do
  if top[i] ~= id and not redis.call('HGET', KEYS[1], 'void:' .. top[i]) then
    latest = tonumber(top[i + 1]); break
  end
end
redis.call('ZADD', KEYS[2], vf, id)
local decision, replaced = 'past', ''
local wins
if correct then wins = true
elseif cur then wins = (not cur_vf) or vf >= cur_vf
else wins = (not latest) or vf >= latest end
if cur == id then
  decision = 'current'
  redis.call('HSET', KEYS[1], 'valid_from', vf)
elseif wins then
  decision = 'current'
  replaced = cur or ''
  redis.call('HSET', KEYS[1], 'current', id, 'valid_from', vf, 'subject', ARGV[3], 'scope', ARGV[4],
    'kind', ARGV[5])
end
return {decision, replaced, redis.call('HGET', KEYS[1], 'current') or '',
  redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')}
"""

# KEYS: history document, document ; ARGV: valid_until, superseded_by -> 1 when shortened, else 0
# A write lands after a version (a past-dated write between two versions, a tie, a write
# after the current one was forgotten): that version now ends where the write begins.
# Only ever shortens, so such writes may arrive in any order. A version its own writer
# has not moved to history yet (concurrent writers) is stamped where it is; RETIRE keeps
# the earlier end when it moves it. Never creates a document that is not there.
_SUBJECT_TRIM = r"""
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then
  key = KEYS[2]
  if redis.call('EXISTS', key) == 0 then return 0 end
end
local ends = tonumber(redis.call('HGET', key, 'valid_until') or '')
if ends and ends <= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', key, 'valid_until', ARGV[1], 'superseded_by', ARGV[2])
return 1
"""

# KEYS: pointer, versions ; ARGV: id, keep (1: a retraction, the version stays listed;
# 0: forgotten or vanished, it leaves the list) -> 1 when it was the current version (the
# subject now has none: forgetting it does not bring the previous one back), else 0
_SUBJECT_DROP = r"""
if ARGV[2] ~= '1' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[1], 'void:' .. ARGV[1])
end
if redis.call('HGET', KEYS[1], 'current') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'current', 'valid_from')
  return 1
end
return 0
"""

SUBJECT_PUT = Script.of("subject_put", _SUBJECT_PUT)
SUBJECT_DROP = Script.of("subject_drop", _SUBJECT_DROP)
SUBJECT_TRIM = Script.of("subject_trim", _SUBJECT_TRIM)
