"""``MemoryStoreKV`` against LangChain's own key-value suites (``BaseStoreSyncTests`` / ``BaseStoreAsyncTests``).

Unchanged suites, on the real engine; each test gets an empty store (its own name).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from langchain_tests.integration_tests import BaseStoreAsyncTests, BaseStoreSyncTests

from betterdb_memory import HashingEmbedder, MemoryStore, SyncMemoryStore
from betterdb_memory.adapters.langchain import MemoryStoreKV

pytestmark = pytest.mark.integration


class TestKVSync(BaseStoreSyncTests[bytes]):
    """On a ``SyncMemoryStore``: LangChain's sync key-value API."""

    @pytest.fixture
    def kv_store(self, sync_store: SyncMemoryStore) -> MemoryStoreKV:
        return MemoryStoreKV(sync_store)

    @pytest.fixture
    def three_values(self) -> tuple[bytes, bytes, bytes]:
        return b"foo", b"\x00bar\xff", "b\u00e4z".encode()


class TestKVAsync(BaseStoreAsyncTests[bytes]):
    """On an async ``MemoryStore``: LangChain's async key-value API on the caller's loop."""

    @pytest.fixture
    async def kv_store(self, valkey_url: str, unique_name: str) -> AsyncIterator[MemoryStoreKV]:
        store = await MemoryStore.connect(
            valkey_url, name=unique_name, embedder=HashingEmbedder(), discovery=False
        )
        try:
            yield MemoryStoreKV(store, namespace="async")
        finally:
            await store.close()

    @pytest.fixture
    def three_values(self) -> tuple[bytes, bytes, bytes]:
        return b"foo", b"\x00bar\xff", "b\u00e4z".encode()
