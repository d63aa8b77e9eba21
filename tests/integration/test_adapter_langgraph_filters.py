"""``LangGraphStore(filter_fields=...)``: declared value keys are filtered by the index (issue 27).

The answers are held to LangGraph's own ``InMemoryStore`` on seeded random items and
filters (declared keys, undeclared keys, nested dicts, mixes), and a search whose filter
is all declared is checked to be one index query (one ``list`` call with ``where``),
not a walk of the prefix.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra is not installed (make test installs it)")

from langgraph.store.memory import InMemoryStore

from betterdb_memory import ConfigurationError, MemoryStore, ValidationError
from betterdb_memory.adapters.langgraph import LangGraphStore

pytestmark = pytest.mark.integration

FILTER_FIELDS = {"status": "tag", "priority": "numeric"}
STATUSES = ("open", "done", "Open", "a b", "x|y", "-n")


def _value(rng: random.Random) -> dict[str, Any]:
    value: dict[str, Any] = {"priority": rng.choice((0, 1, 2, 2.5, 3)), "text": rng.choice(("a", "b"))}
    if rng.random() < 0.8:
        value["status"] = rng.choice(STATUSES)
    if rng.random() < 0.5:
        value["owner"] = {"name": rng.choice(("ada", "bob"))}
    return value


def _filter(rng: random.Random) -> dict[str, Any]:
    choices: list[tuple[str, Any]] = [
        ("status", rng.choice(STATUSES)),
        ("status", {"$ne": rng.choice(STATUSES)}),
        ("status", {"$eq": rng.choice(STATUSES)}),
        ("priority", rng.choice((1, 2.5, 3))),
        ("priority", {rng.choice(("$gt", "$gte", "$lt", "$lte")): rng.choice((0, 1, 2, 3))}),
        ("priority", {"$gt": 0, "$lte": 2.5}),
        ("priority", {"$ne": 2}),
        ("text", rng.choice(("a", "b"))),
        ("owner", {"name": rng.choice(("ada", "bob"))}),
        ("status", 3),  # another type: the client path (no match, as LangGraph)
        ("status", "bad,comma"),  # a value no put could index: the client path
    ]
    return dict(rng.sample(choices, rng.randint(1, 3)))


async def test_filtered_search_equals_in_memory_store(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields=LangGraphStore.store_fields(FILTER_FIELDS))
    ours = LangGraphStore(store, filter_fields=FILTER_FIELDS)
    theirs = InMemoryStore()
    rng = random.Random(2727)
    for i in range(40):
        namespace = ("docs", rng.choice(("x", "y")))
        value = _value(rng)
        await ours.aput(namespace, f"k{i}", value)
        await theirs.aput(namespace, f"k{i}", value)
    for n in range(120):
        prefix = rng.choice((("docs",), ("docs", "x")))
        flt = _filter(rng)
        got = {(i.namespace, i.key) for i in await ours.asearch(prefix, filter=flt, limit=100)}
        want = {(i.namespace, i.key) for i in await theirs.asearch(prefix, filter=flt, limit=100)}
        assert got == want, (n, flt)
        ranked = await ours.asearch(prefix, query="a", filter=flt, limit=100)
        assert {(i.namespace, i.key) for i in ranked} == want, (n, flt, "query")


async def test_a_declared_filter_is_one_index_query(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields=LangGraphStore.store_fields(FILTER_FIELDS))
    ours = LangGraphStore(store, filter_fields=FILTER_FIELDS)
    for i in range(30):
        await ours.aput(("t",), f"k{i}", {"status": "open" if i % 10 == 0 else "done", "priority": i})
    calls: list[dict[str, Any]] = []
    real = store.list

    async def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return await real(*args, **kwargs)

    store.list = spy  # type: ignore[method-assign]
    found = await ours.asearch(("t",), filter={"status": "open", "priority": {"$gte": 10}}, limit=5)
    assert sorted(i.key for i in found) == ["k10", "k20"]
    assert len(calls) == 1 and calls[0]["where"] == {"lg_status": "open", "lg_priority": {"$gte": 10}}
    calls.clear()
    found = await ours.asearch(("t",), filter={"status": "open", "other": None}, limit=5)  # a mixed filter
    assert sorted(i.key for i in found) == ["k0", "k10", "k20"]
    assert len(calls) == 1 and calls[0]["where"] == {"lg_status": "open"}


async def test_puts_refuse_values_the_index_would_disagree_on(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store(metadata_fields=LangGraphStore.store_fields(FILTER_FIELDS))
    ours = LangGraphStore(store, filter_fields=FILTER_FIELDS)
    for bad in (
        {"status": ["open"]},
        {"status": 1},
        {"priority": "high"},
        {"priority": True},
        {"priority": [1]},
    ):
        with pytest.raises(ValidationError):
            await ours.aput(("t",), "k", bad)
    await ours.aput(("t",), "k", {"status": None, "priority": None, "other": [1]})  # None: missing
    assert [i.key for i in await ours.asearch(("t",), filter={"status": {"$ne": "open"}})] == ["k"]


def test_filter_fields_must_be_declared_by_the_store(make_store: Callable[..., MemoryStore]) -> None:
    with pytest.raises(ConfigurationError) as info:
        LangGraphStore(make_store(), filter_fields=FILTER_FIELDS)
    assert info.value.code == "configuration.invalid"
    with pytest.raises(ConfigurationError):
        LangGraphStore(make_store(metadata_fields={"lg_status": "numeric", "lg_priority": "numeric"}),
                       filter_fields=FILTER_FIELDS)  # fmt: skip
    with pytest.raises(ConfigurationError):
        LangGraphStore.store_fields({"a.b": "tag"})
