"""L1 values (``Turn``, ``ToolResult``, ``SessionMetadata``), their codec, and the L1 Lua scripts.

Pure: nothing here does I/O. A session is four keys sharing one hash slot
(``KeySpace.session``): a LIST of turn JSON (oldest first), a HASH of counters, the
summary cursor (a string) and the summariser's lock. Turns are numbered ``seq`` =
1, 2, 3, ... in arrival order by the append script (``HINCRBY turn_count``), and
the list only ever loses turns at its head, so it always holds a contiguous run of
``seq`` values ending at ``turn_count``; the scripts rely on that to find turns by
number without scanning.

Why the list keeps more than the window: a turn older than the window is trimmed
only once it is folded into a long-term summary (its ``seq`` <= the summary cursor),
so a slow or failing summariser delays trimming instead of losing turns. A hard cap
(window + ``max_unsummarized``) bounds the list if the summariser never catches up;
turns dropped at the cap are counted in the ``dropped`` field, never silently.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..errors import ValidationError
from .arguments import is_int
from .codec import as_text, to_float, to_int

__all__ = [
    "APPEND_TURN",
    "ERASE_SESSION",
    "PENDING_TURNS",
    "SESSION_SNAPSHOT",
    "SUMMARY_ADVANCE",
    "SUMMARY_FAILED",
    "SessionMetadata",
    "ToolResult",
    "Turn",
    "decode_turn",
    "encode_turn",
    "parse_tool_results",
    "render_turn",
    "session_metadata_from",
]

MAX_TOOL_RESULTS = 64


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One tool call made while producing a turn (params and result must be JSON-able)."""

    tool_name: str
    params: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    success: bool = True
    duration_ms: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "tool_name": self.tool_name,
            "params": self.params,
            "result": self.result,
            "success": self.success,
            "duration_ms": self.duration_ms,
        }


@dataclass(frozen=True, slots=True)
class Turn:
    """One exchange of a session: the user's message and the assistant's reply.

    ``seq`` is the turn's number in its session (1 = first turn ever stored), the
    number summaries cite in their ``turn_range``. ``timestamp`` is UNIX seconds,
    like every time in the package; ``time`` gives it as an aware datetime.
    """

    id: str
    thread_id: str
    user_message: str
    assistant_message: str
    tool_results: tuple[ToolResult, ...] = ()
    timestamp: float = 0.0
    token_count: int = 0
    seq: int = 0

    @property
    def time(self) -> datetime:
        return datetime.fromtimestamp(self.timestamp, tz=UTC)


@dataclass(frozen=True, slots=True)
class SessionMetadata:
    """Counters of one L1 session.

    Attributes:
        turn_count: turns ever stored in the session (not only those still held).
        retained_turns: turns L1 holds now (the window plus turns awaiting a summary).
        summarized_through: every turn with ``seq`` <= this is in a summary (or was dropped).
        dropped_turns: turns trimmed before any summary covered them (hard cap hit).
        summary_failures: summariser runs that failed (each logged at warning).
    """

    agent_id: str | None
    thread_id: str
    turn_count: int
    created_at: float | None
    last_active: float | None
    retained_turns: int = 0
    summarized_through: int = 0
    dropped_turns: int = 0
    summary_failures: int = 0


# -- codec ------------------------------------------------------------------------------


def _tool_from(value: object, index: int) -> ToolResult:
    def bad(message: str) -> ValidationError:
        return ValidationError(
            f"tool_results[{index}]: {message}",
            code="validation.tool_result",
            details={"argument": "tool_results", "index": index},
        )

    fields: dict[str, object]
    if isinstance(value, ToolResult):
        fields = value.to_json()
    elif isinstance(value, Mapping):
        fields = {str(k): v for k, v in value.items()}
        unknown = set(fields) - {"tool_name", "params", "result", "success", "duration_ms"}
        if unknown:
            raise bad(f"unknown keys {sorted(unknown)}")
    else:
        raise bad(f"must be a ToolResult or a mapping, not {type(value).__name__}")
    name, params = fields.get("tool_name"), fields.get("params") or {}
    success, duration = fields.get("success", True), fields.get("duration_ms")
    if not isinstance(name, str) or not name.strip():
        raise bad("tool_name must be a non-empty string")
    if not isinstance(params, Mapping):
        raise bad("params must be a mapping")
    if not isinstance(success, bool):
        raise bad("success must be a bool")
    if duration is not None and (not is_int(duration) or duration < 0):
        raise bad("duration_ms must be an int >= 0 or None")
    tr = ToolResult(name, {str(k): v for k, v in params.items()}, fields.get("result"), success, duration)
    try:
        json.dumps(tr.to_json(), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise bad(f"params and result must be JSON-serialisable ({exc})") from exc
    return tr


def parse_tool_results(values: object) -> tuple[ToolResult, ...]:
    """Validate ``tool_results`` (ToolResult objects or mappings) at the API boundary."""
    if values is None:
        return ()
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise ValidationError(
            "tool_results must be a list of ToolResult or mappings",
            code="validation.type",
            details={"argument": "tool_results"},
        )
    out = tuple(_tool_from(v, i) for i, v in enumerate(values))
    if len(out) > MAX_TOOL_RESULTS:
        raise ValidationError(
            f"at most {MAX_TOOL_RESULTS} tool_results per turn",
            code="validation.too_many",
            details={"argument": "tool_results", "max": MAX_TOOL_RESULTS},
        )
    return out


def render_turn(user_message: str, assistant_message: str, tool_results: Iterable[ToolResult] = ()) -> str:
    """The text a turn costs in a prompt (what its ``token_count`` measures)."""
    parts = [f"User: {user_message}", f"Assistant: {assistant_message}"]
    for tr in tool_results:
        parts.append(f"Tool {tr.tool_name}: {json.dumps(tr.result, ensure_ascii=False, default=str)}")
    return "\n".join(parts)


def encode_turn(
    turn_id: str,
    user_message: str,
    assistant_message: str,
    tool_results: Iterable[ToolResult],
    timestamp: float | None,
    token_count: int,
) -> str:
    """A turn as the JSON object the append script stores (it prepends ``"seq"`` and ``"ts"``).

    The object must start with ``{`` followed by a key: the script splices
    ``{"seq":<n>,"ts":<time>,`` in front of the rest, which numbers and dates the
    turn inside the same atomic step that orders it. ``timestamp`` None leaves ``ts``
    to the script (``store_turn``); a number stores it as given.
    """
    fields: dict[str, Any] = {
        "id": turn_id,
        "user": user_message,
        "assistant": assistant_message,
        "tools": [tr.to_json() for tr in tool_results],
    }
    if timestamp is not None:
        fields["ts"] = timestamp
    fields["tokens"] = token_count
    return json.dumps(
        fields,
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
    )


def decode_turn(raw: str | bytes, thread_id: str) -> Turn | None:
    """A stored turn back to a ``Turn``; ``None`` for an entry that is not one (never raises)."""
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        return None
    tools: list[ToolResult] = []
    for t in data.get("tools") or ():
        if isinstance(t, dict) and isinstance(t.get("tool_name"), str):
            params = t.get("params")
            tools.append(
                ToolResult(
                    tool_name=t["tool_name"],
                    params=params if isinstance(params, dict) else {},
                    result=t.get("result"),
                    success=bool(t.get("success", True)),
                    duration_ms=t.get("duration_ms") if isinstance(t.get("duration_ms"), int) else None,
                )
            )
    ts = data.get("ts")
    return Turn(
        id=data["id"],
        thread_id=thread_id,
        user_message=str(data.get("user", "")),
        assistant_message=str(data.get("assistant", "")),
        tool_results=tuple(tools),
        timestamp=float(ts) if isinstance(ts, int | float) and math.isfinite(ts) else 0.0,
        token_count=int(data.get("tokens") or 0),
        seq=int(data.get("seq") or 0),
    )


def session_metadata_from(
    agent_id: str | None, thread_id: str, meta: Mapping[Any, Any], retained: int, cursor: Any
) -> SessionMetadata | None:
    """Build ``SessionMetadata`` from the meta HASH (bytes or str replies); None when absent."""
    fields = {as_text(k): v for k, v in meta.items()}
    if not fields:
        return None
    created = to_float(fields.get("created_at"), 0.0)
    last = to_float(fields.get("last_active"), 0.0)
    return SessionMetadata(
        agent_id=agent_id,
        thread_id=thread_id,
        turn_count=to_int(fields.get("turn_count")),
        created_at=created or None,
        last_active=last or None,
        retained_turns=int(retained),
        summarized_through=to_int(cursor),
        dropped_turns=to_int(fields.get("dropped")),
        summary_failures=to_int(fields.get("summary_failures")),
    )


# -- scripts ------------------------------------------------------------------------------
# Every script touches only the keys of one session (one hash slot): legal in a cluster.

# KEYS: turns, meta, cursor
# ARGV: turn_json (without "ts"), now, ttl_ms, window, batch (0 = no summaries), cap (max turns held)
# Returns {seq, pending}: pending = turns older than the window not yet summarised.
# The turn's time is fixed here, where its order is: the caller's clock, but never earlier
# than the session's last turn, so a session's turns are in the order of their timestamps
# even when many clients append at once (each read its clock before its round trip, and
# the server orders them as they arrive). Not the server's TIME: the documented
# least-privilege ACL grants no TIME, and a denied call inside a script fails the append.
APPEND_TURN = r"""
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
SUMMARY_ADVANCE = r"""
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
SUMMARY_FAILED = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
return redis.call('HINCRBY', KEYS[1], 'summary_failures', 1)
"""

# KEYS: meta, turns, cursor -> {HGETALL meta (flat), LLEN turns, cursor or nil}
# A consistent snapshot of the session's counters in one call: a script rather than
# MULTI/EXEC, which valkey-py's cluster client does not offer.
SESSION_SNAPSHOT = r"""
return {redis.call('HGETALL', KEYS[1]), redis.call('LLEN', KEYS[2]), redis.call('GET', KEYS[3])}
"""

# KEYS: turns, cursor ; ARGV: window -> {cursor or nil, the turns older than the window, oldest first}
PENDING_TURNS = r"""
return {redis.call('GET', KEYS[2]), redis.call('LRANGE', KEYS[1], 0, -(tonumber(ARGV[1]) + 1))}
"""

# KEYS: turns, then every other key of the session -> number of turns the session held
ERASE_SESSION = r"""
local n = redis.call('LLEN', KEYS[1])
redis.call('DEL', unpack(KEYS))
return n
"""
