"""An OpenAI Agents SDK ``Session`` over a ``MemoryStore``'s L1 turns, keeping the SDK's raw items.

``Runner.run(agent, input, session=MemoryStoreSession("thread-1", store))`` reads and
writes the conversation here. Two things are kept, both in Valkey (nothing in process
memory, so any number of processes can share a session):

* **The raw items**, exactly as the SDK gives them (messages, function calls and
  outputs, reasoning items, ...), as JSON in a LIST: ``get_items`` returns them, so a
  run replays its history unchanged.
* **L1 turns**: each completed exchange (question, reply, tool calls) is also stored
  with ``store.store_turn``, so ``retrieve_context``, rolling summaries, ``erase`` of
  the turns and BetterDB Monitor see the conversation like any other
  (``_agent_items.plan_turns`` says how items become turns).

Keys: beside the session's L1 keys (``store.keys.session(agent_id, session_id)``, one
hash slot), ``<...>:agents:items`` (the LIST) and ``<...>:agents:folded`` (how many
items are folded into turns), both with the store's session TTL, refreshed on every
``add_items``. The scripts use only commands the store's least-privilege ACL already
grants (``~<name>:l1:*``; RPUSH, LRANGE, LTRIM, LLEN, GET, SET, PEXPIRE, DEL, EVALSHA).

Install with ``pip install 'betterdb-memory[openai-agents]'``.
"""

from __future__ import annotations

import json
from typing import Any

import valkey.exceptions as vexc

from ..core.codec import as_text
from ..core.escaping import validate_tag_value
from ..core.keys import KeySpace
from ..errors import BetterDBMemoryError, ValidationError, translate
from ..store import MemoryStore
from ._agent_items import plan_turns
from ._extras import missing_extra

try:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise missing_extra(
        "The OpenAI Agents session (betterdb_memory.adapters.openai_agents)", "openai-agents", _exc
    ) from _exc

__all__ = ["MemoryStoreSession", "session_item_keys"]

# What the client raises; translated once each, by ``translate`` (errors.py).
_BACKEND_ERRORS = (vexc.ValkeyError, OSError)

# KEYS: items, folded. ARGV: ttl_ms, item... -> {length, folded, items after folded}
_APPEND = """
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
_ADVANCE = """
if tonumber(redis.call('GET', KEYS[1]) or '0') ~= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
"""

# KEYS: items, folded -> the last item (nil when empty); the mark never points past the end.
_POP = """
local last = redis.call('LRANGE', KEYS[1], -1, -1)
if #last == 0 then return false end
redis.call('LTRIM', KEYS[1], 0, -2)
local n = redis.call('LLEN', KEYS[1])
if tonumber(redis.call('GET', KEYS[2]) or '0') > n then redis.call('SET', KEYS[2], n, 'KEEPTTL') end
return last[1]
"""


def session_item_keys(keys: KeySpace, agent_id: str | None, session_id: str) -> tuple[str, str]:
    """The raw-item LIST and the folded-count key of a session, on its L1 keys' hash slot.

    Built in ``KeySpace.session`` (``<name>:l1:{<tag>}:agents:*``), so ``clear_session`` and
    ``erase`` of the store delete them with the session's other keys.
    """
    sk = keys.session(agent_id, session_id)
    return sk.agent_items, sk.agent_folded


class MemoryStoreSession:
    """The SDK's ``Session`` protocol over ``store`` (``isinstance(s, agents.memory.Session)``).

    Args:
        session_id: the conversation; it is the L1 ``thread_id`` (a scope value:
            no ``,``, no outer whitespace).
        store: an open ``MemoryStore`` (the caller closes it).
        agent_id: the L1 ``agent_id`` of the session's turns (optional).
        session_settings: the SDK's settings; ``limit`` is the default of ``get_items``.

    Raises:
        ValidationError: ``session_id`` or ``agent_id`` is not a valid scope value.

    ``pop_item`` removes the newest raw item; an L1 turn already stored from it stays
    (turns are append-only; ``clear_session`` removes both). The raw items live among
    the session's L1 keys (``session_item_keys``), so ``store.clear_session`` and
    ``store.erase`` delete them too, and they expire with the session TTL.
    """

    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: MemoryStore,
        *,
        agent_id: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = validate_tag_value(session_id, name="session_id")
        self.agent_id = None if agent_id is None else validate_tag_value(agent_id, name="agent_id")
        self.session_settings = session_settings if session_settings is not None else SessionSettings()
        self.store = store
        self.items_key, self.folded_key = session_item_keys(store.keys, self.agent_id, self.session_id)
        # Typed loosely: valkey-py's stubs type ``register_script`` and the list commands for
        # the standalone client only, though the cluster client has them too.
        client: Any = store.client
        self._client = client
        self._append = client.register_script(_APPEND)
        self._advance = client.register_script(_ADVANCE)
        self._pop = client.register_script(_POP)

    def _ttl_ms(self) -> int:
        return self.store.session_config.ttl_ms

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first: the last ``limit`` (``session_settings.limit`` when None).

        As in the SDK's ``SQLiteSession``: no limit or a negative one returns every item, 0 none.
        """
        n = resolve_session_limit(limit, self.session_settings)
        if n == 0:
            return []
        start = 0 if n is None or n < 0 else -n
        try:
            raw = await self._client.lrange(self.items_key, start, -1)
        except _BACKEND_ERRORS as exc:
            raise _translated(exc, "get_items") from exc
        return [item for item in (_decode(r) for r in raw) if item is not None]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` (one round trip), then store the L1 turns they complete.

        Raises:
            ValidationError: an item is not JSON-serialisable (nothing is written).
            StoreConnectionError: the server could not be reached (not retried: appending
                is not idempotent).
        """
        if not items:
            return
        try:
            encoded = [json.dumps(item, ensure_ascii=False) for item in items]
        except (TypeError, ValueError) as exc:
            raise ValidationError(
                f"session items must be JSON-serialisable ({exc})",
                code="validation.type",
                details={"argument": "items"},
            ) from exc
        ttl = self._ttl_ms()
        try:
            _, folded, rest = await self._append(keys=[self.items_key, self.folded_key], args=[ttl, *encoded])
        except _BACKEND_ERRORS as exc:
            raise _translated(exc, "add_items") from exc
        pending = [item for item in (_decode(r) for r in rest) if item is not None]
        turns, consumed = plan_turns(pending)
        if not consumed:
            return
        folded = int(folded)
        try:
            moved = await self._advance(keys=[self.folded_key], args=[folded, folded + consumed, ttl])
        except _BACKEND_ERRORS as exc:
            raise _translated(exc, "add_items") from exc
        if not int(moved):
            return  # another writer folded these items first
        for turn in turns:
            await self.store.store_turn(
                self.session_id, turn.user, turn.assistant, agent_id=self.agent_id, tool_results=turn.tools
            )

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (None when the session is empty)."""
        try:
            raw = await self._pop(keys=[self.items_key, self.folded_key])
        except _BACKEND_ERRORS as exc:
            raise _translated(exc, "pop_item") from exc
        return None if raw is None else _decode(raw)

    async def clear_session(self) -> None:
        """Delete the session's items and its L1 turns (its L2 summaries stay; ``store.erase`` removes those)."""
        try:
            await self._client.delete(self.items_key, self.folded_key)
        except _BACKEND_ERRORS as exc:
            raise _translated(exc, "clear_session") from exc
        await self.store.clear_session(self.session_id, agent_id=self.agent_id)


def _decode(raw: Any) -> Any:
    try:
        return json.loads(as_text(raw))
    except ValueError:
        return None  # not written by this adapter; skipped as SQLiteSession skips bad rows


def _translated(exc: BaseException, operation: str) -> BetterDBMemoryError:
    return translate(exc, operation=f"agents_session.{operation}")
