"""LangChain adapters: a retriever, a vector store, embeddings and a chat message history.

* ``MemoryStoreRetriever``: ``BaseRetriever`` over ``recall``.
* ``MemoryStoreVectorStore``: ``VectorStore`` over L2 memories (your ids, upserts,
  ``get_by_ids``, scope and tag filters).
* ``MemoryStoreEmbeddings``: ``Embeddings`` over this library's embedders.
* ``MemoryStoreChatMessageHistory``: ``BaseChatMessageHistory`` over L1 turns, every
  message type kept as written, nothing held in process memory.
* ``MemoryStoreKV``: the key-value ``BaseStore[str, bytes]`` (docstores, embedding caches).

Each takes a ``SyncMemoryStore`` (serves LangChain's sync and async methods) or a
``MemoryStore`` (async methods; sync ones from other threads while its loop runs); see
``_runner``. Install with
``pip install 'betterdb-memory[langchain]'`` (``langchain-core`` 1.x).
"""

from __future__ import annotations

from .._extras import missing_extra

try:
    import langchain_core  # noqa: F401 - the extra's presence, checked once for every adapter here
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise missing_extra(
        "The LangChain adapters (betterdb_memory.adapters.langchain)", "langchain", _exc
    ) from _exc

from .embeddings import MemoryStoreEmbeddings
from .history import MemoryStoreChatMessageHistory
from .kv import MemoryStoreKV
from .retriever import MemoryStoreRetriever
from .vectorstore import MemoryStoreVectorStore

__all__ = [
    "MemoryStoreChatMessageHistory",
    "MemoryStoreEmbeddings",
    "MemoryStoreKV",
    "MemoryStoreRetriever",
    "MemoryStoreVectorStore",
]
