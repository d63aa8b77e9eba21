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
``add_items``. The mechanics (append, fold into turns, pop, clear) are the store's
``tiers.transcripts.Transcript``, through the store's backend; its scripts use only
commands the store's least-privilege ACL already grants (``~<name>:l1:*``; RPUSH,
LRANGE, LTRIM, LLEN, GET, SET, PEXPIRE, DEL, EVALSHA).

Install with ``pip install 'betterdb-memory[openai-agents]'``.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.codec import as_text
from ..core.escaping import validate_tag_value
from ..core.keys import KeySpace
from ..errors import ValidationError
from ..store import MemoryStore
from ..tiers.transcripts import Transcript
from ._agent_items import TurnDraft, plan_turns
from ._extras import missing_extra

try:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise missing_extra(
        "The OpenAI Agents session (betterdb_memory.adapters.openai_agents)", "openai-agents", _exc
    ) from _exc

__all__ = ["MemoryStoreSession", "session_item_keys"]


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
        self._transcript = Transcript(
            store.backend, self.items_key, self.folded_key, operations="agents_session"
        )

    def _ttl_ms(self) -> int:
        return self.store.session_config.ttl_ms

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first: the last ``limit`` (``session_settings.limit`` when None).

        As in the SDK's ``SQLiteSession``: no limit or a negative one returns every item, 0 none.
        """
        n = resolve_session_limit(limit, self.session_settings)
        if n == 0:
            return []
        raw = await self._transcript.read("get_items", last=None if n is None or n < 0 else n)
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
        turns = await self._transcript.append("add_items", encoded, ttl_ms=self._ttl_ms(), plan=_plan)
        for turn in turns:
            await self.store.store_turn(
                self.session_id, turn.user, turn.assistant, agent_id=self.agent_id, tool_results=turn.tools
            )

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (None when the session is empty)."""
        raw = await self._transcript.pop("pop_item")
        return None if raw is None else _decode(raw)

    async def clear_session(self) -> None:
        """Delete the session's items and its L1 turns (its L2 summaries stay; ``store.erase`` removes those)."""
        await self._transcript.clear("clear_session")
        await self.store.clear_session(self.session_id, agent_id=self.agent_id)


def _plan(rest: list[Any]) -> tuple[list[TurnDraft], int]:
    """The turns the items not yet folded complete (items not written by this adapter skipped)."""
    return plan_turns([item for item in (_decode(r) for r in rest) if item is not None])


def _decode(raw: Any) -> Any:
    try:
        return json.loads(as_text(raw))
    except ValueError:
        return None  # not written by this adapter; skipped as SQLiteSession skips bad rows
