"""``AgentMemory``: one client and one name for every tier an agent uses.

``.memory`` is the ``MemoryStore`` (long-term memories and short-term turns),
``.llm``, ``.tool`` and ``.session`` are the caches of ``caches``. The facade only
wires them: every store option (``session_ttl``, ``retry``, ``max_items_per_scope``,
...) goes to the store, and the store's ``name``, client and retry policy go to every
cache, so no option is silently dropped for one tier (the reference's facade
dropped some).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

from .caches import LLMCache, SessionState, ToolCache
from .embedders.base import Embedder
from .errors import ConfigurationError
from .store import MemoryStore

__all__ = ["AgentMemory"]


class AgentMemory:
    """Long- and short-term memory plus LLM, tool and session-state caches on one Valkey.

    Use ``await AgentMemory.connect(url)`` (it owns the client and, without a URL,
    the embedded server) or ``AgentMemory(client=..., name=...)`` with your own client
    (never closed here), or ``AgentMemory(store=...)`` around a store you built.

    Args:
        client: a ``valkey.asyncio.Valkey``.
        name: key prefix and index name of every tier.
        embedder: the store's embedder.
        store: an existing ``MemoryStore`` instead of ``client`` / ``name`` / ``embedder``.
        llm_ttl: seconds an LLM response stays cached (None: until evicted).
        tool_ttl: default seconds a tool result stays cached.
        tool_ttl_policy: per-tool seconds (0 = never cache that tool).
        session_state_ttl: sliding TTL of per-thread state.
        **store_options: every other ``MemoryStore`` option, passed on unchanged.

    Raises:
        ConfigurationError: neither ``client`` nor ``store``, or ``store`` together with
            store options (they could not reach it).
    """

    def __init__(
        self,
        *,
        client: Any = None,
        name: str = "betterdb",
        embedder: Embedder | None = None,
        store: MemoryStore | None = None,
        llm_ttl: float | None = 3600,
        tool_ttl: float | None = 300,
        tool_ttl_policy: Mapping[str, float | None] | None = None,
        session_state_ttl: float = 86400,
        **store_options: Any,
    ) -> None:
        if store is None:
            if client is None:
                raise ConfigurationError("AgentMemory needs client= (or store=)", code="configuration.client")
            store = MemoryStore(client=client, name=name, embedder=embedder, **store_options)
        elif client is not None or embedder is not None or store_options:
            raise ConfigurationError(
                "pass either store= or client=/embedder=/store options, not both",
                code="configuration.ambiguous",
                details={"options": sorted(store_options)},
            )
        self.memory = store
        self.llm = LLMCache(store.client, store.name, ttl=llm_ttl, retry=store.retry)
        self.tool = ToolCache(
            store.client, store.name, default_ttl=tool_ttl, ttl_policy=tool_ttl_policy, retry=store.retry
        )
        self.session = SessionState(store.client, store.name, ttl=session_state_ttl, retry=store.retry)

    @classmethod
    async def connect(
        cls,
        url: str | None = None,
        *,
        name: str = "betterdb",
        embedder: Embedder | None = None,
        llm_ttl: float | None = 3600,
        tool_ttl: float | None = 300,
        tool_ttl_policy: Mapping[str, float | None] | None = None,
        session_state_ttl: float = 86400,
        **store_options: Any,
    ) -> AgentMemory:
        """Open everything on ``url`` (or the embedded server); see ``MemoryStore.connect``."""
        store = await MemoryStore.connect(url, name=name, embedder=embedder, **store_options)
        try:
            return cls(
                store=store, llm_ttl=llm_ttl, tool_ttl=tool_ttl, tool_ttl_policy=tool_ttl_policy,
                session_state_ttl=session_state_ttl,
            )  # fmt: skip
        except BaseException:
            await store.close()
            raise

    @property
    def name(self) -> str:
        return self.memory.name

    async def initialize(self) -> None:
        """Create the index if needed (otherwise done lazily by the first call that needs it)."""
        await self.memory.ensure_index()

    async def close(self) -> None:
        """Close the store (draining summaries); the caches share its client."""
        await self.memory.close()

    async def erase(self, *, agent_id: str, thread_id: str | None = None) -> int:
        """Right to erasure across tiers: memories and turns (``MemoryStore.erase``) and session state.

        LLM and tool caches are keyed by request, not by agent, and are not touched:
        do not cache responses that carry personal data, or give them a short TTL.
        Returns what ``MemoryStore.erase`` returns plus the session-state entries removed.
        """
        n = await self.memory.erase(agent_id=agent_id, thread_id=thread_id)
        if thread_id is None:
            n += await self.session.clear_agent(agent_id)
        else:
            n += int(await self.session.clear(thread_id, agent_id=agent_id))
        return n

    async def __aenter__(self) -> AgentMemory:
        await self.initialize()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
