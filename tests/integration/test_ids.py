"""Caller ids, upsert, update and update history, on the real engine."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from betterdb_memory import (
    HashingEmbedder,
    MemoryNotFoundError,
    MemoryStore,
    ValidationError,
)

pytestmark = pytest.mark.integration


class CountingEmbedder(HashingEmbedder):
    """The hashing embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    async def embed(self, texts: list[str]) -> Any:
        self.texts.extend(texts)
        return await super().embed(texts)


@pytest.fixture
async def store(client: Any, unique_name: str) -> Any:
    s = MemoryStore(client=client, name=unique_name, embedder=CountingEmbedder(), discovery=False)
    yield s
    await s.forget_by_scope(namespace="ids")
    await s.close()


async def test_caller_id_is_kept_as_given_and_readable(store: Any) -> None:
    mid = await store.remember("Ada lives in Lisbon.", id="user:ada/home".replace("/", "-"), namespace="ids")
    assert mid == "user:ada-home"
    item = await store.get(mid)
    assert item is not None and item.content == "Ada lives in Lisbon."
    assert [
        h.item.id for h in await store.recall("Where does Ada live?", namespace="ids", threshold=2.0)
    ] == [mid]
    assert [i.id for i in await store.get_many([mid, "nope"]) if i is not None] == [mid]


async def test_bad_ids_are_refused_before_anything_is_written(store: Any) -> None:
    for bad in ("", "has space", "a" * 201, "*", "x{y}"):
        with pytest.raises(ValidationError) as caught:
            await store.remember("x", id=bad, namespace="ids")
        assert caught.value.code == "validation.memory_id"
    with pytest.raises(ValidationError) as twice:
        await store.remember_many([{"content": "a", "id": "k"}, {"content": "b", "id": "k"}])
    assert twice.value.code == "validation.duplicate_id"
    assert await store.count(namespace="ids") == 0


async def test_upsert_replaces_keeps_life_and_embeds_only_changed_text(store: Any) -> None:
    embedder = store.embedder
    await store.remember(
        "first text", id="m1", namespace="ids", tags=["a"], metadata={"v": 1}, importance=0.4
    )
    before = await store.get("m1")
    await store.recall("first text", namespace="ids", threshold=2.0)  # one access
    await asyncio.sleep(0.01)
    embedded = len(embedder.texts)
    # Same text, other importance: replaced without an embedding call, stale fields gone.
    await store.remember("first text", id="m1", namespace="ids", importance=0.9)
    assert len(embedder.texts) == embedded
    same = await store.get("m1")
    assert same.importance == 0.9 and same.tags == [] and same.metadata == {}
    assert same.created_at == before.created_at and same.access_count >= 1
    # New text: embedded once, still one memory.
    await store.remember("second text", id="m1", namespace="ids")
    assert embedder.texts[embedded:] == ["second text"]
    assert await store.count(namespace="ids") == 1
    hits = await store.recall("second text", namespace="ids", threshold=2.0, k=3)
    assert [h.item.id for h in hits] == ["m1"] and hits[0].item.content == "second text"
    versions = await store.history("m1")
    assert [v.content for v in versions] == ["first text", "first text"]
    assert versions[1].tags == ["a"] and versions[1].metadata == {"v": 1} and versions[1].importance == 0.4
    assert versions[0].replaced_at >= versions[1].replaced_at


async def test_update_changes_only_what_is_given(store: Any) -> None:
    mid = await store.remember("the deploy key rotates monthly", namespace="ids", tags=["ops"], ttl=600)
    item = await store.update(mid, importance=0.95, metadata={"owner": "sre"})
    assert item.content == "the deploy key rotates monthly" and item.tags == ["ops"]
    assert item.importance == 0.95 and item.metadata == {"owner": "sre"} and item.namespace == "ids"
    assert item.expires_at is not None  # the remaining TTL is kept
    ttl_ms = await store.client.pttl(store.keys.doc(mid))
    assert 0 < ttl_ms <= 600_000
    item = await store.update(mid, content="the deploy key rotates weekly", ttl=0)
    assert item.content == "the deploy key rotates weekly" and item.expires_at is None
    assert await store.client.pttl(store.keys.doc(mid)) == -1
    assert [v.content for v in await store.history(mid)] == [
        "the deploy key rotates monthly",
        "the deploy key rotates monthly",
    ]
    with pytest.raises(MemoryNotFoundError) as missing:
        await store.update("no-such-memory", importance=0.1)
    assert missing.value.code == "validation.not_found"


async def test_memory_not_found_names_the_id(store: Any) -> None:
    """``MemoryNotFoundError.memory_id`` is the id asked for, not a sentence about it."""
    with pytest.raises(MemoryNotFoundError) as missing:
        await store.update("no-such-memory", content="x")
    assert missing.value.memory_id == "no-such-memory"
    assert missing.value.details["memory_id"] == "no-such-memory"
    assert "no-such-memory" in missing.value.message


async def test_forget_removes_the_history_too(store: Any) -> None:
    await store.remember("v1", id="gone", namespace="ids")
    await store.update("gone", content="v2")
    assert len(await store.history("gone")) == 1
    assert await store.forget("gone") is True
    assert await store.history("gone") == []
    assert await store.client.exists(store.keys.updates("gone")) == 0


async def test_a_memory_deleted_elsewhere_leaves_nothing_to_its_successor(store: Any, client: Any) -> None:
    """Another client (betterdb-agent-memory's ``forget``) deletes the document only; a new
    memory written under the same id starts with no history and no accesses."""
    await store.remember("old text", id="reused", namespace="ids")
    await store.update("reused", content="old text, edited")
    for _ in range(3):
        await store.recall_by_vector(
            (await store.embedder.embed(["old text, edited"]))[0], namespace="ids", threshold=2.0
        )
    assert len(await store.history("reused")) == 1
    assert int(await client.get(store.keys.access("reused"))) == 3
    await client.delete(store.keys.doc("reused"))  # the foreign delete: the document alone

    await store.remember("a new memory", id="reused", namespace="ids")
    item = await store.get("reused")
    assert item is not None and item.content == "a new memory" and item.access_count == 0
    assert await store.history("reused") == []
    await store.recall("a new memory", namespace="ids", threshold=2.0)
    again = await store.get("reused")
    assert again is not None and again.access_count == 1
