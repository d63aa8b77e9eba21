"""LangChain ``BaseChatMessageHistory`` over a ``MemoryStore``'s L1 turns, every message kept as written.

Two things are kept, both in Valkey (nothing in process memory: any number of
processes, or ``RunnableWithMessageHistory`` calls, share a history):

* **The messages**, every type (human, AI with tool calls, tool, system, function,
  chat, ...) as ``message_to_dict`` JSON in a LIST, so ``messages`` returns them equal
  to what was added.
* **L1 turns**: each completed exchange (question, reply, tool calls) is also stored
  with ``store.store_turn``, so ``retrieve_context``, rolling summaries and Monitor see
  the conversation (``_messages.plan_message_turns``).

Keys, as for the OpenAI Agents session (``adapters.openai_agents``), beside the
session's L1 keys on one hash slot: ``<...>:langchain:messages`` (the LIST) and
``<...>:langchain:folded`` (how many messages are folded into turns), with the store's
session TTL, refreshed on every add. The mechanics are the store's
``tiers.transcripts.Transcript`` (shared with that session), through the store's
backend; its scripts use only commands the store's least-privilege ACL grants on
``~<name>:l1:*`` (RPUSH, LRANGE, LLEN, PEXPIRE, GET, SET, DEL, EVALSHA).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from ...core.codec import as_text
from ...core.escaping import validate_tag_value
from ...core.keys import KeySpace
from ...store import MemoryStore
from ...tiers.transcripts import Transcript
from .._agent_items import TurnDraft
from ._messages import plan_message_turns
from ._runner import AnyStore, StoreRunner

__all__ = ["MemoryStoreChatMessageHistory", "history_keys"]


def history_keys(keys: KeySpace, agent_id: str | None, session_id: str) -> tuple[str, str]:
    """The message LIST and the folded-count key of a history, on its L1 keys' hash slot."""
    sk = keys.session(agent_id, session_id)
    return sk.chat_messages, sk.chat_folded


class MemoryStoreChatMessageHistory(BaseChatMessageHistory):
    """The chat history of ``session_id`` (the L1 ``thread_id``) in ``store``.

    Args:
        session_id: the conversation (a scope value: no ``,``, no outer whitespace).
        store: a ``SyncMemoryStore`` (sync and async methods) or a ``MemoryStore`` (async
            methods; see ``_runner`` for sync ones); the caller closes it.
        agent_id: the L1 ``agent_id`` of the turns (optional).

    ``clear`` deletes the messages and the session's L1 turns (its L2 summaries stay;
    ``store.erase`` removes those). The message keys are keys of the session:
    ``store.clear_session`` and ``store.erase`` delete them too.
    """

    def __init__(self, session_id: str, store: AnyStore, *, agent_id: str | None = None) -> None:
        self._runner = StoreRunner(store)
        self.session_id = validate_tag_value(session_id, name="session_id")
        self.agent_id = None if agent_id is None else validate_tag_value(agent_id, name="agent_id")
        self.messages_key, self.folded_key = history_keys(
            self._runner.store.keys, self.agent_id, self.session_id
        )
        self._transcript = Transcript(
            self._runner.store.backend, self.messages_key, self.folded_key, operations="langchain_history"
        )

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message, oldest first, read from Valkey on each access."""
        return self._runner.call(self._read)

    async def aget_messages(self) -> list[BaseMessage]:
        """Every message, oldest first."""
        return await self._runner.acall(self._read)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` (one round trip), then store the L1 turns they complete."""
        self._runner.call(self._add, _encode(messages))

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` (one round trip), then store the L1 turns they complete."""
        await self._runner.acall(self._add, _encode(messages))

    def clear(self) -> None:
        """Delete the messages and the session's L1 turns."""
        self._runner.call(self._clear)

    async def aclear(self) -> None:
        """Delete the messages and the session's L1 turns."""
        await self._runner.acall(self._clear)

    # -- operations (run on the store's loop) --------------------------------------------------

    async def _read(self, store: MemoryStore) -> list[BaseMessage]:
        return _decode(await self._transcript.read("messages"))

    async def _add(self, store: MemoryStore, encoded: list[str]) -> None:
        if not encoded:
            return
        ttl = store.session_config.ttl_ms
        turns = await self._transcript.append("add_messages", encoded, ttl_ms=ttl, plan=_plan)
        for turn in turns:
            await store.store_turn(
                self.session_id, turn.user, turn.assistant, agent_id=self.agent_id, tool_results=turn.tools
            )

    async def _clear(self, store: MemoryStore) -> None:
        await self._transcript.clear("clear")
        await store.clear_session(self.session_id, agent_id=self.agent_id)


def _encode(messages: Sequence[BaseMessage]) -> list[str]:
    return [json.dumps(message_to_dict(m), ensure_ascii=False, default=str) for m in messages]


def _plan(rest: list[Any]) -> tuple[list[TurnDraft], int]:
    """The turns the messages not yet folded complete (entries not written by this adapter skipped)."""
    return plan_message_turns(_decode(rest))


def _decode(raw: Sequence[Any]) -> list[BaseMessage]:
    dicts = []
    for entry in raw:
        try:
            dicts.append(json.loads(as_text(entry)))
        except ValueError:
            continue  # not written by this adapter
    return messages_from_dict(dicts)
