"""Adapters that put a ``MemoryStore`` where agent frameworks look for memory.

Each is a thin layer over the public API, in its own module behind its own extra, and
nothing here imports a framework: importing ``betterdb_memory`` or this package loads
none of them. Importing an adapter without its extra raises a ``ConfigurationError``
naming the extra (``configuration.missing_extra``).

* ``betterdb_memory.adapters.mcp``: an MCP server exposing the store's tools
  (``betterdb-memory mcp``; extra ``mcp``).
* ``betterdb_memory.adapters.openai_agents``: an OpenAI Agents SDK ``Session`` over the
  store's L1 turns, keeping the SDK's raw items (extra ``openai-agents``).
* ``betterdb_memory.adapters.langgraph``: a LangGraph ``BaseStore`` over the store's L2
  memories, for ``graph.compile(store=...)`` (extra ``langgraph``).
* ``betterdb_memory.adapters.langchain``: a LangChain retriever, vector store,
  embeddings and chat message history over the store (extra ``langchain``).
"""

from __future__ import annotations

__all__: list[str] = []
