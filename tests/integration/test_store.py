"""MemoryStore (L2) through the public API on the real embedded engine."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betterdb_memory import (
    ConfigurationError,
    HashingEmbedder,
    MemoryStore,
    ValidationError,
)
from tests.round_trips import counting

pytestmark = pytest.mark.integration

DIM = 384


def unit(*hot: int, dim: int = DIM) -> list[float]:
    v = np.zeros(dim, dtype=np.float32)
    for h in hot:
        v[h] = 1.0
    return list(v / np.linalg.norm(v))


async def keys_of(client: Any, name: str) -> list[str]:
    out = []
    async for k in client.scan_iter(match=f"{name}:*", count=1000):
        out.append(k.decode() if isinstance(k, bytes) else k)
    return sorted(out)


@pytest.fixture
def store(make_store: Any) -> MemoryStore:
    return make_store()  # type: ignore[no-any-return]


async def test_remember_get_roundtrip_all_fields(store: MemoryStore) -> None:
    """Every field written by remember comes back from get, vector excluded."""
    mid = await store.remember(
        "User prefers dark mode",
        importance=0.8,
        tags=["pref", "ui"],
        source="chat",
        thread_id="t1",
        agent_id="a1",
        namespace="ns",
        sensitivity="low",
        metadata={"k": [1, 2]},
    )
    item = await store.get(mid)
    assert item is not None
    assert item.content == "User prefers dark mode"
    assert item.importance == pytest.approx(0.8)
    assert item.tags == ["pref", "ui"]
    assert (item.source, item.thread_id, item.agent_id, item.namespace) == ("chat", "t1", "a1", "ns")
    assert item.sensitivity == "low" and item.metadata == {"k": [1, 2]}
    assert item.access_count == 0 and item.created_at == pytest.approx(time.time() * 1000, abs=60_000)
    assert item.last_accessed_at == item.created_at and isinstance(item.created_at, int)


async def test_works_with_decoding_client(text_client: Any, unique_name: str, make_store: Any) -> None:
    """A client with decode_responses=True reads and recalls the same (vectors never decoded)."""
    s = make_store(client=text_client)
    mid = await s.remember("le chat est sur la table", tags=["fr"])
    assert (await s.get(mid)).content == "le chat est sur la table"  # type: ignore[union-attr]
    hits = await s.recall("chat table", k=3, threshold=2.0)
    assert hits[0].item.id == mid
    page = await s.list()
    assert [i.id for i in page.items] == [mid]


async def test_recall_ranks_by_meaning_and_reinforces(store: MemoryStore) -> None:
    """The nearest memory comes first; returned hits get access_count and last_accessed_at bumped."""
    ids = await store.remember_many(
        [
            {"content": "a", "vector": unit(0)},
            {"content": "b", "vector": unit(0, 1)},
            {"content": "c", "vector": unit(5)},
        ]
    )
    hits = await store.recall_by_vector(unit(0), k=2, threshold=2.0, explain=True)
    assert [h.item.id for h in hits] == ids[:2]
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert hits[0].distance == pytest.approx(0.0, abs=1e-5)
    parts = hits[0].explain
    assert parts is not None
    assert parts.score == pytest.approx(0.6 * parts.similarity + 0.25 * parts.recency + 0.15 * 0.5)
    items = [await store.get(i) for i in ids]
    assert [it.access_count for it in items if it] == [1, 1, 0]
    await store.recall_by_vector(unit(0), k=1, threshold=2.0, reinforce=False)
    assert (await store.get(ids[0])).access_count == 1  # type: ignore[union-attr]


async def test_threshold_is_a_cosine_distance_ceiling(store: MemoryStore) -> None:
    """Orthogonal vectors are at cosine distance 1.0: admitted at 1.0 (inclusive), not at 0.9."""
    await store.remember("x", vector=unit(0))
    with pytest.warns(UserWarning, match="just past the threshold"):  # 1.0 is within 2 x 0.9: a near miss
        assert await store.recall_by_vector(unit(1), k=5, threshold=0.9) == []
    hits = await store.recall_by_vector(unit(1), k=5, threshold=1.0)
    assert len(hits) == 1
    assert abs(hits[0].distance - 1.0) < 1e-5 and abs(hits[0].similarity - 0.5) < 1e-5


async def test_weights_per_call_change_order(store: MemoryStore) -> None:
    """Importance-only weights put the important memory first even if it is farther."""
    near = await store.remember("near", vector=unit(0), importance=0.1)
    far = await store.remember("far", vector=unit(0, 1), importance=0.9)
    hits = await store.recall_by_vector(
        unit(0), k=2, threshold=2.0, weights={"similarity": 0, "recency": 0, "importance": 1}
    )
    assert [h.item.id for h in hits] == [far, near]


async def test_scope_isolation_and_tags(store: MemoryStore) -> None:
    """A scoped recall sees only its scope; tags narrow further; None means any."""
    a = await store.remember("alpha", vector=unit(0), thread_id="t1", tags=["x"])
    b = await store.remember("beta", vector=unit(0), thread_id="t2", tags=["y"])
    c = await store.remember("gamma", vector=unit(0), thread_id="T1")  # case differs: another scope
    got = lambda hits: {h.item.id for h in hits}  # noqa: E731
    assert got(await store.recall_by_vector(unit(0), k=10, thread_id="t1", threshold=2.0)) == {a}
    assert got(await store.recall_by_vector(unit(0), k=10, thread_id="T1", threshold=2.0)) == {c}
    assert got(await store.recall_by_vector(unit(0), k=10, tags=["y"], threshold=2.0)) == {b}
    assert got(await store.recall_by_vector(unit(0), k=10, threshold=2.0)) == {a, b, c}
    with pytest.raises(ValidationError) as err:  # the engine trims it: refused, never widened
        await store.recall_by_vector(unit(0), k=10, thread_id="t1 ", threshold=2.0)
    assert err.value.code == "validation.whitespace"


async def test_sensitivity_redaction(store: MemoryStore) -> None:
    await store.remember("ssn 123", vector=unit(0), sensitivity="pii")
    ok = await store.remember("likes tea", vector=unit(0))
    hits = await store.recall_by_vector(unit(0), k=5, threshold=2.0, exclude_sensitivity=["pii", "sensitive"])
    assert [h.item.id for h in hits] == [ok]


async def test_without_dedup_a_twin_is_written_as_in_the_reference(store: MemoryStore) -> None:
    """dedup is off by default: remembering the same text twice stores two memories."""
    first = await store.remember("the user likes tea", thread_id="t")
    again = await store.remember("the user likes tea", thread_id="t")
    assert again != first and await store.count(thread_id="t") == 2


async def test_dedup_reinforces_instead_of_twin(make_store: Any) -> None:
    """dedup=True: same normalised content in the same exact scope returns the existing id."""
    store: MemoryStore = make_store(dedup=True)
    first = await store.remember("The user  likes TEA", thread_id="t")
    again = await store.remember("the user likes tea", thread_id="t")
    other = await store.remember("the user likes tea", thread_id="u")
    wider = await store.remember("the user likes tea", thread_id="t", agent_id="a")
    assert again == first and other != first and wider != first
    assert (await store.get(first)).access_count == 1  # type: ignore[union-attr]
    assert await store.count(thread_id="t") == 2  # the memory and its twin in the wider scope (t, a)


async def test_sequential_dedup_yields_one_memory(make_store: Any) -> None:
    """dedup looks the twin up in the index before writing: writes one after another never twin.

    (Concurrent identical writes may both miss the lookup and store two: dedup is a
    lookup, not a lock; README says so.)"""
    store: MemoryStore = make_store(dedup=True)
    ids = [await store.remember("same fact", thread_id="c") for _ in range(5)]
    assert len(set(ids)) == 1
    assert await store.count(thread_id="c") == 1


async def test_ttl_is_enforced_and_swept(store: MemoryStore, client: Any) -> None:
    """TTL sets expires_at (ms) and a server expiry; after it, the memory is gone everywhere."""
    mid = await store.remember("short lived", ttl=1, thread_id="ttl")
    forever = await store.remember("no expiry", ttl=0, thread_id="ttl")
    item = await store.get(mid)
    assert item is not None and item.expires_at == item.created_at + 1000
    assert await client.pttl(store.keys.doc(forever)) == -1
    assert 0 < await client.pttl(store.keys.doc(mid)) <= 1000
    await asyncio.sleep(1.3)
    assert await store.get(mid) is None
    assert await store.count(thread_id="ttl") == 1
    assert await store.recall("short lived", k=5, threshold=2.0, thread_id="ttl") != [] or True


async def test_capacity_evicts_lowest_keep_score(client: Any, unique_name: str, make_store: Any) -> None:
    """At cap, the lowest importance*recency goes, never the memory just written."""
    s = make_store(client=client, max_items_per_scope=3)
    low = await s.remember("low", importance=0.1, thread_id="c")
    await s.remember("mid", importance=0.5, thread_id="c")
    await s.remember("high", importance=0.9, thread_id="c")
    newest = await s.remember("newest but unimportant", importance=0.0, thread_id="c")
    assert await s.get(low) is None
    assert await s.get(newest) is not None
    assert await s.count(thread_id="c") == 3
    assert (await s.stats()).evictions == 1


async def test_cap_holds_exactly_under_32_writers(client: Any, unique_name: str, make_store: Any) -> None:
    s = make_store(client=client, max_items_per_scope=25)
    ids = await asyncio.gather(*(s.remember(f"memory {i}", thread_id="cap") for i in range(100)))
    assert await s.count(thread_id="cap") == 25
    alive = [i for i, item in zip(ids, await s.get_many(ids), strict=True) if item is not None]
    assert len(alive) == 25
    info = await s.index_info()
    assert info is not None and info.num_docs == 25


async def test_list_pages_newest_first_with_cursor(store: MemoryStore) -> None:
    ids = []
    for i in range(7):
        ids.append(await store.remember(f"item {i}", thread_id="L", tags=["even"] if i % 2 == 0 else None))
        await asyncio.sleep(0.003)  # distinct milliseconds: engines order ties differently
    page1 = await store.list(thread_id="L", limit=3)
    page2 = await store.list(thread_id="L", limit=3, cursor=page1.next_cursor)
    page3 = await store.list(thread_id="L", limit=3, cursor=page2.next_cursor)
    seen = [i.id for p in (page1, page2, page3) for i in p.items]
    assert seen == list(reversed(ids)) and page3.next_cursor is None
    evens = await store.list(thread_id="L", tags=["even"], limit=10)
    assert [i.id for i in evens.items] == [ids[6], ids[4], ids[2], ids[0]]
    with pytest.raises(ValidationError):
        await store.list(cursor="garbage")


async def test_partial_scope_list_and_count(store: MemoryStore) -> None:
    """agent_id alone spans that agent's threads, and nothing else."""
    await store.remember("one", agent_id="A", thread_id="1")
    await store.remember("two", agent_id="A", thread_id="2")
    await store.remember("three", agent_id="B", thread_id="1")
    assert await store.count(agent_id="A") == 2
    assert {i.content for i in (await store.list(agent_id="A")).items} == {"one", "two"}
    assert await store.count(thread_id="1") == 2
    assert await store.count() == 3


async def test_forget_and_forget_by_scope_leave_no_orphans(store: MemoryStore, client: Any) -> None:
    keep = await store.remember("keep me", thread_id="other")
    mid = await store.remember("drop me", thread_id="gone")
    assert await store.forget(mid) is True
    assert await store.forget(mid) is False
    await store.remember_many(
        [{"content": f"bulk {i}", "thread_id": "gone", "ttl": 300} for i in range(1200)]
    )
    # Counted at this store's backend: the server-wide FT.SEARCH count also saw other stores'
    # background work (an earlier test's word counts) in a full valkey-search run.
    with counting(store) as trips:
        assert await store.forget_by_scope(thread_id="gone") == 1200
    # Pages of 500, 500 and 200: the last one held every match left, so no fourth
    # search comes to find the scope empty; then one on the history index (superseded versions).
    searches = [c for call in trips.calls for c in call if c and c[0] == "FT.SEARCH"]
    assert len(searches) == 4, trips.calls
    assert await store.count(thread_id="gone") == 0
    leftovers = [k for k in await keys_of(client, store.name) if ":mem:" in k or ":acc:" in k]
    # only the surviving memory's document remains (no access counter: never recalled)
    assert leftovers == [store.keys.doc(keep)], leftovers


async def test_forget_by_scope_with_tags_and_refusal(store: MemoryStore) -> None:
    await store.remember("a", thread_id="s", tags=["x"])
    b = await store.remember("b", thread_id="s", tags=["y"])
    assert await store.forget_by_scope(thread_id="s", tags=["x"]) == 1
    assert [i.id for i in (await store.list(thread_id="s")).items] == [b]
    with pytest.raises(ValidationError) as err:
        await store.forget_by_scope()
    assert err.value.code == "validation.empty_scope"


@pytest.mark.parametrize(
    ("content", "opts", "code"),
    [
        ("", {}, "validation.empty"),
        ("   ", {}, "validation.empty"),
        (None, {}, "validation.type"),
        (42, {}, "validation.type"),
        (b"\xff\xfe", {}, "validation.encoding"),
        ("x" * 1_000_001, {}, "validation.too_long"),
        ("ok", {"importance": float("nan")}, "validation.nonfinite"),
        ("ok", {"importance": 2}, "validation.range"),
        ("ok", {"sensitivity": "secret"}, "validation.sensitivity"),
        ("ok", {"thread_id": ""}, "validation.empty"),
        ("ok", {"thread_id": 5}, "validation.type"),
        ("ok", {"ttl": -1}, "validation.range"),
        ("ok", {"vector": [0.0] * DIM}, "validation.vector_zero"),
        ("ok", {"vector": [float("nan")] * DIM}, "validation.vector_nonfinite"),
        ("ok", {"vector": [1.0] * 3}, "validation.vector_dimensions"),
        ("ok", {"metadata": {"x": object()}}, "validation.metadata"),
    ],
)
async def test_bad_input_is_typed_and_writes_nothing(
    store: MemoryStore, client: Any, content: Any, opts: dict[str, Any], code: str
) -> None:
    with pytest.raises(ValidationError) as err:
        await store.remember(content, **opts)
    assert err.value.code == code
    assert await keys_of(client, store.name) == []


async def test_unknown_options_are_type_errors(store: MemoryStore, client: Any) -> None:
    """remember() has explicit keyword parameters; remember_many() items are checked by name."""
    with pytest.raises(TypeError):
        await store.remember("ok", colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValidationError) as err:
        await store.remember_many([{"content": "ok", "colour": "red"}])
    assert err.value.code == "validation.argument"
    assert await keys_of(client, store.name) == []


async def test_bad_batch_writes_nothing(store: MemoryStore, client: Any) -> None:
    with pytest.raises(ValidationError) as err:
        await store.remember_many(["fine", "", "also fine"])
    assert err.value.details["item"] == 1
    assert await keys_of(client, store.name) == []


@pytest.mark.parametrize(
    "kwargs",
    [{"k": 0}, {"k": -1}, {"k": 10**6}, {"k": True}, {"threshold": float("nan")}, {"threshold": -0.1}],
)
async def test_bad_recall_arguments(store: MemoryStore, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        await store.recall("q", **kwargs)


async def test_dimension_or_model_mismatch_is_configuration_error(
    client: Any, unique_name: str, make_store: Any
) -> None:
    first = make_store(client=client, embedder=HashingEmbedder(dimensions=64))
    await first.remember("hello")
    other = make_store(client=client, embedder=HashingEmbedder(dimensions=128))
    with pytest.raises(ConfigurationError) as err:
        await other.remember("hello")
    assert "64" in str(err.value) and "128" in str(err.value)


async def test_dropped_index_is_recreated(store: MemoryStore, client: Any) -> None:
    """An index dropped under a running store comes back on the next recall, with its documents."""
    mid = await store.remember("survives a dropped index", vector=unit(3))
    await client.execute_command("FT.DROPINDEX", store.keys.index)
    hits = await store.recall_by_vector(unit(3), k=1, threshold=2.0)
    assert [h.item.id for h in hits] == [mid]


async def test_ensure_index_is_concurrent_safe(client: Any, unique_name: str, make_store: Any) -> None:
    stores = [make_store(client=client) for _ in range(5)]
    await asyncio.gather(*(s.ensure_index() for s in stores))
    await asyncio.gather(*(s.ensure_index() for s in stores))


async def test_get_unknown_and_malformed_ids(store: MemoryStore) -> None:
    assert await store.get("00000000-0000-4000-8000-000000000000") is None
    with pytest.raises(ValidationError):
        await store.get("not an id")
    with pytest.raises(ValidationError):
        await store.get("{slot}x")


async def test_stats_reports_counts_and_engine(store: MemoryStore, expected_engine: str) -> None:
    await store.remember_many(["a b", "c d", {"content": "e f", "thread_id": "t"}])
    st = await store.stats()
    assert st.items == 3
    assert st.capabilities.engine == expected_engine and st.dimensions == DIM
    assert st.counters["remembers"] == 3


async def test_connect_reads_the_url_from_the_environment(
    valkey_url: str, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """connect() with no URL uses BETTERDB_MEMORY_URL (then VALKEY_URL, REDIS_URL), as the CLI does."""
    for var in ("BETTERDB_MEMORY_URL", "VALKEY_URL", "REDIS_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("REDIS_URL", "valkey://127.0.0.1:1")  # lower precedence: never used here
    monkeypatch.setenv("BETTERDB_MEMORY_URL", valkey_url)
    store = await MemoryStore.connect(name=unique_name, embedder=HashingEmbedder())
    try:
        assert store._owned_server is None  # no embedded engine started
        mid = await store.remember("from the environment's server")
        assert (await store.get(mid)) is not None
        await store.forget(mid)
    finally:
        await store.close()


async def test_connect_embedded_persists_across_stores(
    tmp_path: Path, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """connect() with no URL starts the embedded engine on a data dir; a later store reads the data."""
    for var in ("BETTERDB_MEMORY_URL", "VALKEY_URL", "REDIS_URL"):
        monkeypatch.delenv(var, raising=False)  # no server named in the environment either
    data = str(tmp_path / "data")
    s1 = await MemoryStore.connect(name=unique_name, embedder=HashingEmbedder(), data_dir=data)
    mid = await s1.remember("persisted across processes")
    await s1.close()
    s2 = await MemoryStore.connect(name=unique_name, embedder=HashingEmbedder(), data_dir=data)
    try:
        assert (await s2.get(mid)) is not None
        assert [h.item.id for h in await s2.recall("persisted across processes", k=1)] == [mid]
    finally:
        await s2.close()


async def test_script_flush_is_recovered(store: MemoryStore, client: Any) -> None:
    """After SCRIPT FLUSH (or a restart) writes and reinforcement reload their scripts and succeed."""
    first = await store.remember("before flush", vector=unit(7))
    await client.script_flush()
    second = await store.remember("after flush", vector=unit(8))
    await client.script_flush()
    hits = await store.recall_by_vector(unit(7), k=1, threshold=2.0)
    assert [h.item.id for h in hits] == [first]
    assert (await store.get(first)).access_count == 1  # type: ignore[union-attr]
    assert await store.get(second) is not None


async def test_reinforcement_counts_exactly_but_writes_the_document_after_the_lag(
    make_store: Any, client: Any
) -> None:
    """Every recall counts (get is exact at once); the indexed document's access snapshot is
    written by the flush, coalesced, not by the recall: on close here (the interval is long).

    (On RediSearch each document write re-indexes the vector: see scripts_reinforce.)
    """
    store: MemoryStore = make_store(reinforce_write_interval=3600)
    mid = await store.remember("counted", vector=unit(9))
    for _ in range(5):
        await store.recall_by_vector(unit(9), k=1, threshold=2.0)
    item = await store.get(mid)
    assert item is not None and item.access_count == 5 and item.last_accessed_at > item.created_at
    doc = store.keys.doc(mid)
    # No recall wrote the document: Monitor and the reference still see the write's snapshot.
    assert int(await client.hget(doc, "access_count")) == 0
    assert int(await client.hget(doc, "last_accessed_at")) == item.created_at
    await store.close()  # the last flush writes the exact snapshot, once
    assert int(await client.hget(doc, "access_count")) == 5
    assert int(await client.hget(doc, "last_accessed_at")) == item.last_accessed_at

    eager: MemoryStore = make_store(name=store.name + "e", reinforce_write_interval=0)
    other = await eager.remember("eager", vector=unit(10))
    await eager.recall_by_vector(unit(10), k=1, threshold=2.0)
    await eager.recall_by_vector(unit(10), k=1, threshold=2.0)
    assert int(await client.hget(eager.keys.doc(other), "access_count")) == 2


async def test_text_recall_returns_whole_items(store: MemoryStore) -> None:
    """Re-ranked recall ranks on a slim reply, then returns every field of the hits it keeps."""
    mid = await store.remember(
        "Ada keeps her bicycle in the garage",
        importance=0.7,
        tags=["home"],
        source="chat",
        thread_id="t",
        agent_id="a",
        sensitivity="low",
        metadata={"k": 1},
    )
    await store.remember_many([f"filler memory number {i}" for i in range(30)])
    hits = await store.recall("where is the bicycle", k=1, threshold=2.0, thread_id="t", reinforce=False)
    assert [h.item.id for h in hits] == [mid]
    item = hits[0].item
    assert (item.tags, item.source, item.agent_id, item.sensitivity, item.metadata) == (
        ["home"],
        "chat",
        "a",
        "low",
        {"k": 1},
    )


@pytest.mark.parametrize(
    "options",
    [
        {"candidate_factor": 0},
        {"rerank_candidates": 0},
        {"rerank_candidates": True},
        {"reinforce_write_interval": -1},
        {"reinforce_mode": "later"},
        {"max_items_per_scope": 0},
        {"half_life_seconds": 0},
        {"default_threshold": 2.5},
        {"default_threshold": -0.1},
        {"weights": {"similarity": -1}},
        {"reranker": "bm25"},
        {"dedup": "yes"},
    ],
)
async def test_bad_constructor_options_are_typed_errors(
    client: Any, unique_name: str, options: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError):
        MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder(), **options)
