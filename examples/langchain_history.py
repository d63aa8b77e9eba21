"""A LangChain-style chat message history stored as betterdb-memory turns (L1).

``MemoryChatHistory`` implements the interface LangChain's ``BaseChatMessageHistory``
asks for (``messages``, ``add_messages``, ``clear``, and the async ``aget_messages``,
``aadd_messages``, ``aclear``) on the public ``MemoryStore`` API, without importing
LangChain, so this file runs without it. A human message and the AI reply that
follows it become one turn (``store_turn``); ``messages`` reads them back oldest
first (``get_recent_turns``); ``clear`` deletes the session (``clear_session``).

With ``langchain-core`` installed, make it a real ``BaseChatMessageHistory`` by mixing
it in first and building LangChain message objects::

    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

    class ValkeyChatMessageHistory(MemoryChatHistory, BaseChatMessageHistory):
        def make_message(self, role: str, content: str) -> BaseMessage:
            return HumanMessage(content) if role == "human" else AIMessage(content)

    history = ValkeyChatMessageHistory(store, thread_id=session_id, agent_id="bot")

(checked with langchain-core 1.8, including ``RunnableWithMessageHistory.ainvoke``).

Incoming messages only need ``.type`` (``"human"`` / ``"ai"``) and ``.content`` (a
string), which LangChain's ``HumanMessage`` and ``AIMessage`` have.

The async methods are the real implementation. The sync ones are for callers on
another thread while the store's event loop runs (LangChain runs sync history
methods in a worker thread from async code); calling them on the loop's own thread
would block it, so they raise instead and point at the async twins.

Run: ``python examples/langchain_history.py`` (``VALKEY_URL`` for your server,
otherwise the embedded engine in a temporary data dir).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from betterdb_memory import MemoryStore

T = TypeVar("T")


@dataclass(frozen=True)
class ChatMessage:
    """A minimal stand-in for LangChain's ``BaseMessage``: ``type`` and ``content``."""

    type: str  # "human" or "ai", as in LangChain
    content: str


class MemoryChatHistory:
    """Chat history of one (agent, thread) session, kept as turns in a ``MemoryStore``.

    Args:
        store: an open store (the caller owns and closes it).
        thread_id: the conversation (LangChain's ``session_id``).
        agent_id: the agent, so two agents' sessions never mix.
        timeout: seconds a sync call waits for the store.

    A human message waits in this object until its AI reply arrives; then both are
    stored as one turn. Other message types (system, tool) are refused: system prompts
    belong in the prompt template, not in the history.
    """

    def __init__(
        self, store: MemoryStore, *, thread_id: str, agent_id: str | None = None, timeout: float = 30.0
    ) -> None:
        self.store = store
        self.thread_id = thread_id
        self.agent_id = agent_id
        self.timeout = timeout
        self._pending_human: str | None = None
        self._loop = asyncio.get_running_loop()  # the loop the store's client belongs to

    def make_message(self, role: str, content: str) -> Any:
        """Build one message object (override to return LangChain messages)."""
        return ChatMessage(role, content)

    # -- async interface (the implementation) ---------------------------------------------

    async def aget_messages(self) -> list[Any]:
        turns = await self.store.get_recent_turns(self.thread_id, agent_id=self.agent_id)
        out: list[Any] = []
        for turn in turns:
            out.append(self.make_message("human", turn.user_message))
            out.append(self.make_message("ai", turn.assistant_message))
        if self._pending_human is not None:
            out.append(self.make_message("human", self._pending_human))
        return out

    async def aadd_messages(self, messages: Sequence[Any]) -> None:
        for message in messages:
            role, content = getattr(message, "type", None), getattr(message, "content", None)
            if not isinstance(content, str) or role not in ("human", "ai"):
                raise ValueError(f"only human and AI text messages are stored, not {role!r}")
            if role == "human":
                if self._pending_human is not None:  # two human messages in a row: keep both
                    content = f"{self._pending_human}\n{content}"
                self._pending_human = content
                continue
            if self._pending_human is None:
                raise ValueError("an AI message must follow a human message")
            human, self._pending_human = self._pending_human, None
            await self.store.store_turn(self.thread_id, human, content, agent_id=self.agent_id)

    async def aclear(self) -> None:
        self._pending_human = None
        await self.store.clear_session(self.thread_id, agent_id=self.agent_id)

    # -- sync interface (from another thread) ---------------------------------------------

    @property
    def messages(self) -> list[Any]:
        return self._sync(self.aget_messages())

    def add_messages(self, messages: Sequence[Any]) -> None:
        self._sync(self.aadd_messages(messages))

    def add_message(self, message: Any) -> None:
        self.add_messages([message])

    def clear(self) -> None:
        self._sync(self.aclear())

    def _sync(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            coro.close()
            raise RuntimeError("on the event loop's thread: use aget_messages / aadd_messages / aclear")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout)


def sync_caller(history: MemoryChatHistory) -> None:
    """What a sync LangChain component does (runs in a worker thread)."""
    history.add_messages(
        [ChatMessage("human", "Any museum tips?"), ChatMessage("ai", "Try the tile museum.")]
    )
    print(f"sync caller sees {len(history.messages)} messages")


async def main() -> None:
    url = os.environ.get("VALKEY_URL") or None  # None: the embedded engine
    with tempfile.TemporaryDirectory(prefix="betterdb-langchain-") as data_dir:
        store = await MemoryStore.connect(url, name="example-langchain", data_dir=data_dir)
        try:
            await demo(store)
        finally:
            await store.close()


async def demo(store: MemoryStore) -> None:
    history = MemoryChatHistory(store, thread_id="session-42", agent_id="langchain-bot")
    await history.aclear()  # start from an empty session
    await history.aadd_messages([ChatMessage("human", "Hi, I'm Ada."), ChatMessage("ai", "Hello Ada!")])
    await history.aadd_messages([ChatMessage("human", "I'm visiting Lisbon next week.")])
    print(f"pending human message: {len(await history.aget_messages())} messages")
    await history.aadd_messages([ChatMessage("ai", "Lisbon is lovely in spring.")])
    await asyncio.to_thread(sync_caller, history)

    # A fresh object (another request, another process) reads the same stored turns.
    again = MemoryChatHistory(store, thread_id="session-42", agent_id="langchain-bot")
    for message in await again.aget_messages():
        print(f"  {message.type:>5}: {message.content}")
    meta = await store.get_session_metadata("session-42", agent_id="langchain-bot")
    print(f"turns stored: {meta.turn_count if meta else 0}")
    await again.aclear()
    print(f"after clear: {len(await history.aget_messages())} messages")


if __name__ == "__main__":
    asyncio.run(main())
