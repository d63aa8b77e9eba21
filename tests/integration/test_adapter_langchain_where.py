"""The LangChain vector store's ``filter=`` on declared metadata and built-in fields (issue 27)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("langchain_core", reason="the langchain extra is not installed (make test installs it)")

from betterdb_memory import MemoryStore, ValidationError
from betterdb_memory.adapters.langchain import MemoryStoreVectorStore

pytestmark = pytest.mark.integration


async def test_filter_passes_declared_and_builtin_keys_as_where(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store(metadata_fields={"priority": "numeric", "project": "tag"})
    vs = MemoryStoreVectorStore(store, namespace="docs")
    await vs.aadd_texts(
        ["apollo notes", "gemini notes", "untyped notes"],
        metadatas=[{"priority": 3, "project": "apollo"}, {"priority": 1, "project": "gemini"}, {"x": 1}],
        ids=["a", "g", "u"],
    )
    await store.remember("other scope", namespace="elsewhere", metadata={"priority": 3})

    async def ids(flt: dict[str, object]) -> list[str]:
        return sorted(d.id or "" for d in await vs.asimilarity_search("notes", k=10, filter=flt))

    assert await ids({"priority": {"$gte": 2}}) == ["a"]
    assert await ids({"project": {"$ne": "apollo"}}) == ["g", "u"]
    assert await ids({"$or": [{"project": "gemini"}, {"priority": {"$exists": False}}]}) == ["g", "u"]
    assert await ids({"importance": {"$gte": 0}, "priority": 3}) == ["a"]
    assert await ids({"namespace": {"$in": ["elsewhere", "docs"]}, "priority": 3}) == ["a"]  # only narrows
    with pytest.raises(ValidationError) as info:
        await ids({"x": 1})
    assert info.value.code == "validation.filter"
    with pytest.raises(ValidationError) as info:
        await ids({"priority": "high"})
    assert info.value.code == "validation.filter_type"
