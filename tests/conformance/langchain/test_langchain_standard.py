"""The LangChain adapters against LangChain's own standard suites (package ``langchain-tests``).

Each class below is one of LangChain's published suites, unchanged, given our component
on the real engine: ``RetrieversIntegrationTests`` (``MemoryStoreRetriever`` over
``recall``), ``VectorStoreIntegrationTests`` (``MemoryStoreVectorStore``, sync and async),
``EmbeddingsUnitTests`` / ``EmbeddingsIntegrationTests`` (``MemoryStoreEmbeddings`` over
the hashing and the ONNX embedders).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_tests.integration_tests import (
    EmbeddingsIntegrationTests,
    RetrieversIntegrationTests,
    VectorStoreIntegrationTests,
)
from langchain_tests.unit_tests import EmbeddingsUnitTests

from betterdb_memory import HashingEmbedder, MemoryStore, SyncMemoryStore
from betterdb_memory.adapters.langchain import (
    MemoryStoreEmbeddings,
    MemoryStoreRetriever,
    MemoryStoreVectorStore,
)

pytestmark = pytest.mark.integration

FACTS = [
    "Ada takes the 7:40 train to Lisbon on weekdays.",
    "Ada prefers green tea to coffee.",
    "The Lisbon office opens at nine.",
    "Ada's manager is Grace.",
    "Trains to Lisbon leave from platform 4.",
]


class TestRetrieverStandard(RetrieversIntegrationTests):
    """``MemoryStoreRetriever`` on a store holding a few memories about Ada's commute."""

    store: SyncMemoryStore

    @pytest.fixture(autouse=True)
    def _memories(self, sync_store: SyncMemoryStore) -> None:
        for fact in FACTS:
            sync_store.remember(fact, thread_id="ada")
        type(self).store = sync_store

    @property
    def retriever_constructor(self) -> type[MemoryStoreRetriever]:
        return MemoryStoreRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        # No threshold: the suite asks for exactly k documents, whatever their distance.
        return {"store": self.store, "thread_id": "ada", "threshold": 2.0}

    @property
    def retriever_query_example(self) -> str:
        return "When does Ada's train to Lisbon leave?"


class TestVectorStoreStandard(VectorStoreIntegrationTests):
    """``MemoryStoreVectorStore`` over an empty store per test (its own name and index)."""

    @pytest.fixture
    def vectorstore(self, sync_store: SyncMemoryStore) -> MemoryStoreVectorStore:  # type: ignore[override]
        return MemoryStoreVectorStore(sync_store)


class TestVectorStoreStandardAsyncStore(VectorStoreIntegrationTests):
    """``MemoryStoreVectorStore`` over an async ``MemoryStore``: the suite's async half (its sync
    half needs a ``SyncMemoryStore``; the suite skips it when ``has_sync`` is False)."""

    @pytest.fixture
    async def vectorstore(self, valkey_url: str, unique_name: str) -> AsyncIterator[MemoryStoreVectorStore]:  # type: ignore[override]
        store = await MemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder())
        try:
            yield MemoryStoreVectorStore(store)
        finally:
            await store.close()

    @property
    def has_sync(self) -> bool:
        return False


class TestHashingEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[MemoryStoreEmbeddings]:
        return MemoryStoreEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": HashingEmbedder(64)}


class TestHashingEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[MemoryStoreEmbeddings]:
        return MemoryStoreEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": HashingEmbedder(64)}


class TestOnnxEmbeddingsIntegration(EmbeddingsIntegrationTests):
    """The shipped default embedder (ONNX MiniLM, extra ``onnx``)."""

    @property
    def embeddings_class(self) -> type[MemoryStoreEmbeddings]:
        return MemoryStoreEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {}
