"""``where=`` through the store's public API on the real server (issue 27).

Declared metadata fields are written with each memory and filtered by the index:
every operator, MongoDB's missing-field rules, hostile values, typed errors before
any I/O, the index-in-use check, the write path (upserts leave nothing stale), the
selector rules of ``forget_by_scope`` / ``consolidate``, and the cost (a filtered
``list`` / ``count`` is one index query).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from betterdb_memory import MemoryStore
from betterdb_memory.errors import CommandNotSupportedError, ConfigurationError, ValidationError
from betterdb_memory.transfer import export_store
from tests.filter_cases import VALKEY_1_0

pytestmark = pytest.mark.integration

FIELDS = {"priority": "numeric", "project": "tag"}


async def _seed(store: MemoryStore) -> dict[str, str]:
    """Five memories in namespace "n" (and one elsewhere); returns content -> id."""
    items: list[dict[str, Any]] = [
        {"content": "alpha", "metadata": {"priority": 1, "project": "apollo"}, "source": "web"},
        {"content": "beta", "metadata": {"priority": 3, "project": ["gemini", "x|y"]}, "tags": ["t1"]},
        {"content": "gamma", "metadata": {"priority": 2.5}, "importance": 0.9},
        {"content": "delta", "metadata": {"project": "Apollo", "other": "kept"}},
        {"content": "epsilon"},
    ]
    ids = await store.remember_many([{**i, "namespace": "n"} for i in items])
    await store.remember("zeta", namespace="other", metadata={"priority": 1, "project": "apollo"})
    return {i["content"]: mid for i, mid in zip(items, ids, strict=True)}


async def _names(store: MemoryStore, where: Any) -> set[str]:
    page = await store.list(namespace="n", where=where, limit=100)
    assert page.total == len(page.items)
    assert await store.count(namespace="n", where=where) == page.total
    hits = await store.recall("alpha", namespace="n", where=where, threshold=2.0, k=20, reinforce=False)
    listed = {i.content for i in page.items}
    assert {h.item.content for h in hits} == listed
    return listed


CASES: list[tuple[Any, set[str]]] = [
    ({"priority": 1}, {"alpha"}),
    ({"priority": {"$eq": 3}}, {"beta"}),
    ({"priority": {"$ne": 1}}, {"beta", "gamma", "delta", "epsilon"}),  # missing matches $ne
    ({"priority": {"$gt": 1}}, {"beta", "gamma"}),  # a comparison on a missing field is false
    ({"priority": {"$gte": 2.5}}, {"beta", "gamma"}),
    ({"priority": {"$lt": 3}}, {"alpha", "gamma"}),
    ({"priority": {"$lte": 1}}, {"alpha"}),
    ({"priority": {"$gt": 1, "$lt": 3}}, {"gamma"}),
    ({"priority": {"$in": [1, 3]}}, {"alpha", "beta"}),
    ({"priority": {"$nin": [1, 3]}}, {"gamma", "delta", "epsilon"}),
    ({"priority": {"$exists": True}}, {"alpha", "beta", "gamma"}),
    ({"priority": {"$exists": False}}, {"delta", "epsilon"}),
    ({"project": "apollo"}, {"alpha"}),  # exact case
    ({"project": "Apollo"}, {"delta"}),
    ({"project": "gemini"}, {"beta"}),  # a list matches any of its values
    ({"project": "x|y"}, {"beta"}),  # a hostile value is one value
    ({"project": {"$ne": "apollo"}}, {"beta", "gamma", "delta", "epsilon"}),
    ({"project": {"$in": ["apollo", "gemini"]}}, {"alpha", "beta"}),
    ({"project": {"$nin": ["apollo", "gemini"]}}, {"gamma", "delta", "epsilon"}),
    ({"project": {"$exists": True}}, {"alpha", "beta", "delta"}),
    ({"project": {"$exists": False}}, {"gamma", "epsilon"}),
    ({"$or": [{"priority": 1}, {"project": "gemini"}]}, {"alpha", "beta"}),
    ({"$and": [{"priority": {"$exists": True}}, {"project": {"$exists": False}}]}, {"gamma"}),
    ({"$not": {"priority": {"$gte": 2}}}, {"alpha", "delta", "epsilon"}),
    (
        {"$or": [{"priority": {"$ne": 1}}, {"project": "apollo"}]},
        {"alpha", "beta", "gamma", "delta", "epsilon"},
    ),
    ({"source": "web"}, {"alpha"}),
    ({"source": {"$ne": "web"}}, {"beta", "gamma", "delta", "epsilon"}),
    ({"tags": "t1"}, {"beta"}),
    ({"importance": {"$gt": 0.5}}, {"gamma"}),
    ({"created_at": {"$gt": 0}}, {"alpha", "beta", "gamma", "delta", "epsilon"}),
    ({"namespace": "other"}, set()),  # ANDed with namespace="n": can only narrow
    ({}, {"alpha", "beta", "gamma", "delta", "epsilon"}),
]


@pytest.mark.parametrize(("where", "expected"), CASES, ids=[json.dumps(c[0]) for c in CASES])
async def test_every_operator_through_list_count_and_recall(
    make_store: Callable[..., MemoryStore], where: Any, expected: set[str]
) -> None:
    store = make_store(metadata_fields=FIELDS)
    await _seed(store)
    assert await _names(store, where) == expected


async def test_hostile_values_never_widen(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields=FIELDS)
    await store.remember("a", namespace="n", metadata={"project": "a"})
    await store.remember("b", namespace="n", metadata={"project": "b"})
    for value in ("*", "a*"):  # a trailing '*' is a prefix wildcard to valkey-search: refused
        with pytest.raises(ValidationError) as info:
            await store.count(where={"project": value})
        assert info.value.code == "validation.filter_value"
    for value in ("a|b", "a b", "*a", "{a}", "a} | @project:{b", "-a", "%a%", "a\\", "@namespace:{n}"):
        assert await store.count(where={"project": value}) == 0, value
        assert await store.count(where={"project": {"$in": [value]}}) == 0, value
        assert await store.count(where={"project": {"$ne": value}}) == 2, value
    assert await store.count(where={"namespace": "n|x"}) == 0


@pytest.mark.parametrize(
    ("where", "code"),
    [
        ({"undeclared": 1}, "validation.filter_field"),
        ({"priority": "high"}, "validation.filter_type"),
        ({"project": {"$gt": "a"}}, "validation.filter_type"),
        ({"priority": {"$regex": "x"}}, "validation.filter_operator"),
        ({"priority": {"$in": []}}, "validation.filter_empty"),
        ({"$or": []}, "validation.filter_empty"),
        ({"priority": True}, "validation.filter_type"),
        ({"priority": float("nan")}, "validation.filter_value"),
        ({"project": "bad,comma"}, "validation.filter_value"),
        ({"metadata.priority": 1}, "validation.filter_field"),
        ("priority=1", "validation.filter_type"),
    ],
)
async def test_bad_filters_are_typed_errors_before_any_io(
    make_store: Callable[..., MemoryStore], where: Any, code: str
) -> None:
    store = make_store(metadata_fields=FIELDS)
    calls = (
        lambda: store.list(where=where),
        lambda: store.count(where=where),
        lambda: store.recall("x", where=where),
        lambda: store.recall_by_vector([0.1] * store.embedder.dimensions, where=where),
        lambda: store.forget_by_scope(where=where),
        lambda: store.retrieve_context("t", "q", token_budget=100, where=where),
    )
    for call in calls:
        with pytest.raises(ValidationError) as info:
            await call()
        assert info.value.code == code
    assert not store.index.ready  # nothing was sent: the index was never even looked at


async def test_too_deep_and_too_large_filters(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields=FIELDS)
    deep: dict[str, Any] = {"priority": 1}
    for _ in range(9):
        deep = {"$not": deep}
    with pytest.raises(ValidationError) as info:
        await store.count(where=deep)
    assert info.value.code == "validation.filter_depth"
    with pytest.raises(ValidationError) as info:
        await store.count(where={"project": {"$in": [f"v{i}" for i in range(200)]}})
    assert info.value.code == "validation.filter_size"
    # Within the term bound but over the query-size bound: long values.
    with pytest.raises(ValidationError) as info:
        await store.count(where={"project": {"$in": ["v" * 100 + str(i) for i in range(100)]}})
    assert info.value.code == "validation.filter_size"
    assert not store.index.ready


def test_bad_declarations_fail_at_construction(make_store: Callable[..., MemoryStore]) -> None:
    for declared, code in (
        ({"source": "tag"}, "configuration.reserved_field"),
        ({"Namespace": "tag"}, "configuration.reserved_field"),
        ({"a-b": "tag"}, "configuration.field_name"),
        ({"p": "text"}, "configuration.choice"),
        (["p"], "configuration.type"),
    ):
        with pytest.raises(ConfigurationError) as info:
            make_store(metadata_fields=declared)
        assert info.value.code == code


async def test_writes_check_declared_values_and_upserts_leave_nothing_stale(
    make_store: Callable[..., MemoryStore], client: Any
) -> None:
    store = make_store(metadata_fields=FIELDS)
    for bad in ({"priority": "high"}, {"priority": True}, {"project": 3}, {"project": "a,b"}):
        with pytest.raises(ValidationError) as info:
            await store.remember("x", metadata=bad)
        assert info.value.code in ("validation.metadata_field", "validation.comma")
        with pytest.raises(ValidationError):
            await store.remember_many(["ok", {"content": "x", "metadata": bad}])
    assert not store.index.ready
    mid = await store.remember("x", id="m1", metadata={"priority": 2, "project": "p"})
    assert await store.count(where={"priority": 2}) == 1
    await store.remember("x", id="m1", metadata={"project": "q"})  # upsert: priority gone
    assert await store.count(where={"priority": {"$exists": True}}) == 0
    assert await store.count(where={"project": "q"}) == 1
    await store.update(mid, metadata={})
    assert await store.count(where={"project": {"$exists": True}}) == 0
    raw = await client.hgetall(store.keys.doc(mid))
    assert not [k for k in raw if k.startswith((b"meta_", b"present"))]
    with pytest.raises(ValidationError):
        await store.update(mid, metadata={"priority": "x"})
    item = await store.get(mid)
    assert item is not None and item.metadata == {}


async def test_the_declaration_is_recorded(make_store: Callable[..., MemoryStore], client: Any) -> None:
    store = make_store(metadata_fields=FIELDS)
    await store.count()
    meta = await client.hgetall(store.keys.meta)
    assert json.loads(meta[b"metadata_fields"]) == FIELDS


async def test_a_field_the_index_in_use_lacks_is_refused(
    make_store: Callable[..., MemoryStore], unique_name: str
) -> None:
    old = make_store()
    await old.remember("a", metadata={"priority": 1})
    new = make_store(metadata_fields=FIELDS)  # same store, index made before the declaration
    with pytest.raises(ValidationError) as info:
        await new.count(where={"priority": 1})
    assert info.value.code == "validation.filter_field"
    assert info.value.details["reason"] == "indexing"
    with pytest.raises(ValidationError):
        await new.recall("a", where={"project": {"$exists": True}})
    assert await new.count(where={"importance": {"$gte": 0}}) == 1  # built-ins still work


async def test_forget_by_scope_with_where(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields=FIELDS)
    names = await _seed(store)
    with pytest.raises(ValidationError) as info:
        await store.forget_by_scope(where={})
    assert info.value.code == "validation.empty_scope"
    assert await store.forget_by_scope(where={"priority": {"$gte": 2}}) == 2
    assert {i.content for i in (await store.list(limit=100)).items} == {"alpha", "delta", "epsilon", "zeta"}
    assert await store.forget_by_scope(namespace="n", where={"project": {"$exists": False}}) == 1
    assert await store.get(names["epsilon"]) is None
    assert await store.count() == 3


async def test_retrieve_context_consolidate_and_export_take_where(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store(metadata_fields=FIELDS)
    await _seed(store)
    ctx = await store.retrieve_context("t", "alpha", token_budget=2000, where={"priority": {"$gte": 2}})
    assert {h.item.content for h in ctx.memories} <= {"beta", "gamma"}

    seen: list[str] = []

    def summarize(items: Any) -> str:
        seen.extend(i.content for i in items)
        return "digest"

    result = await store.consolidate(
        "summary", summarize, namespace="n", where={"project": {"$exists": True}}, delete_sources=False
    )
    assert sorted(seen) == ["alpha", "beta", "delta"]
    assert result.consolidated == 3

    out = io.StringIO()
    await export_store(store, out, where={"priority": 1})
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(r["fields"]["content"] for r in rows if r.get("type") == "memory") == ["alpha", "zeta"]


async def test_filtered_list_and_count_are_one_index_query(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields=FIELDS)
    await _seed(store)
    await store.count()  # the index is in place
    sent: list[list[Any]] = []
    search = store.backend.search

    async def counting(operation: str, args: Any, *a: Any, **kw: Any) -> Any:
        sent.append(list(args))
        return await search(operation, args, *a, **kw)

    store.backend.search = counting  # type: ignore[method-assign]
    assert await store.count(where={"priority": {"$gte": 2}}) == 2
    assert len(sent) == 1 and sent[0][0] == "FT.SEARCH" and "@meta_priority:[2.0 +inf]" in str(sent[0][2])
    sent.clear()
    page = await store.list(where={"project": {"$in": ["apollo", "gemini"]}}, limit=1)
    assert page.total == 3 and len(page.items) == 1
    assert len(sent) == 1 and sent[0][0] == "FT.SEARCH"


async def test_an_engine_without_filter_queries_gets_a_typed_error_never_a_scan(
    make_store: Callable[..., MemoryStore],
) -> None:
    """valkey-search 1.0 runs no query without KNN: filter-only reads with where are refused, recall works."""
    store = make_store(metadata_fields=FIELDS)
    await _seed(store)
    store.index.capabilities = VALKEY_1_0  # as probed on valkey-search 1.0
    for call in (
        lambda: store.list(where={"priority": 1}),
        lambda: store.count(where={"priority": 1}),
        lambda: store.forget_by_scope(where={"priority": 1}),
        lambda: store.consolidate("summary", lambda items: "x", where={"priority": 1}),
    ):
        with pytest.raises(CommandNotSupportedError) as info:
            await call()
        assert info.value.code == "server.filter_unsupported"
        assert info.value.details["engine"] == "valkey-search"
    hits = await store.recall("alpha", where={"priority": 1}, threshold=2.0, reinforce=False)
    assert {h.item.content for h in hits} == {"alpha", "zeta"}
    assert await store.count() == 6  # without where: the 1.0 path (a KNN read) as before


async def test_where_beside_time_windows(make_store: Callable[..., MemoryStore]) -> None:
    """as_of reads the history index too, which holds no declared field: built-ins only there."""
    store = make_store(metadata_fields=FIELDS)
    await _seed(store)
    now = int(time.time() * 1000) + 1000
    for call in (
        lambda: store.list(as_of=now, where={"priority": 1}),
        lambda: store.count(as_of=now, where={"project": {"$exists": True}}),
        lambda: store.recall("alpha", as_of=now, where={"priority": 1}),
    ):
        with pytest.raises(ValidationError) as info:
            await call()
        assert info.value.code == "validation.filter_field" and info.value.details["reason"] == "history"
    assert await store.count(as_of=now, where={"source": "web"}) == 1
    assert await store.count(since=0, until=now, where={"priority": {"$gte": 2}}) == 2
    assert await store.count(since=now, where={"priority": {"$gte": 2}}) == 0
