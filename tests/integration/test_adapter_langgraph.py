"""The LangGraph ``BaseStore`` adapter on the real engine: against ``InMemoryStore``, and in a graph.

LangGraph publishes no conformance suite for stores, so the adapter is checked operation
by operation against LangGraph's own ``InMemoryStore`` on seeded random sequences (the
port of langgraph's store tests is ``test_adapter_langgraph_port.py``), and a small
``StateGraph`` reads and writes memories through ``store`` end to end.

Where the two stores may differ by design, only what both define is compared:
``search`` results are compared as sets when the page holds every match (the order
differs: newest-created first here, insertion order there; with a ``query`` this
store ranks by meaning while an ``InMemoryStore`` without an index ignores the query),
and by length when ``limit``/``offset`` cut a page. ``get``, ``put``, ``delete`` and
``list_namespaces`` (sorted in both) are compared exactly.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any, TypedDict

import pytest
import valkey.asyncio as avalkey

pytest.importorskip("langgraph", reason="the langgraph extra is not installed (make test installs it)")

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from betterdb_memory import ConfigurationError, HashingEmbedder, MemoryStore, SyncMemoryStore, ValidationError
from betterdb_memory._loop_thread import SyncReentrancyError
from betterdb_memory.adapters.langgraph import LangGraphStore, item_id
from tests.reliability.test_acl import STORE_RULES, _denials, _user_url

pytestmark = pytest.mark.integration

# Labels LangGraph allows but a scope value would not (",", spaces, a trailing newline).
NAMESPACES = [
    ("a",),
    ("a", "b"),
    ("a", "b", "c"),
    ("a", "c"),
    ("b",),
    ("b", "x,y"),
    ("users", "alice"),
    ("users", "alice\n"),
    ("users", "al ice", "notes"),
]
KEYS = ["k1", "k2", "k3", "key with space"]
WORDS = ["apple", "car", "tea", "lisbon", "train", "coffee", "blue", "red"]
COLORS = ["red", "blue", "green"]


class ReferenceStore(InMemoryStore):
    """LangGraph's ``InMemoryStore``, listing only namespaces that hold items.

    ``InMemoryStore`` keeps a namespace in its listing after its last item is deleted,
    and even after a ``get`` of a namespace that never held one (its dict is a
    ``defaultdict``); ``PostgresStore`` lists namespaces that hold items, and so does
    this adapter (the listing is read from the stored memories).
    """

    def _handle_list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        for ns in [ns for ns, items in self._data.items() if not items]:
            del self._data[ns]
        return super()._handle_list_namespaces(op)


def random_value(rng: random.Random) -> dict[str, Any]:
    value: dict[str, Any] = {"n": rng.randint(0, 5), "text": " ".join(rng.sample(WORDS, rng.randint(1, 3)))}
    if rng.random() < 0.7:
        value["color"] = rng.choice(COLORS)
    if rng.random() < 0.5:
        value["nested"] = {"x": rng.randint(0, 2), "y": "z"}
    if rng.random() < 0.3:
        value["tags"] = rng.sample(["a", "b", "c"], 2)
    return value


def random_filter(rng: random.Random) -> dict[str, Any] | None:
    return rng.choice(
        [
            None,
            {"color": rng.choice(COLORS)},
            {"n": {"$gt": rng.randint(0, 5)}},
            {"n": {"$lte": rng.randint(0, 5)}, "color": rng.choice(COLORS)},
            {"n": {"$gte": 2, "$lt": 4}},
            {"n": {"$ne": rng.randint(0, 5)}},
            {"n": {"$eq": rng.randint(0, 5)}},
            {"nested": {"x": rng.randint(0, 2)}},
            {"tags": ["a", "b"]},
            {"missing": None},
        ]
    )


def random_prefix(rng: random.Random) -> tuple[str, ...]:
    ns = rng.choice(NAMESPACES)
    return ns[: rng.randint(0, len(ns))]


def random_match(rng: random.Random) -> tuple[MatchCondition, ...]:
    conditions = []
    if rng.random() < 0.5:
        path = list(random_prefix(rng))
        if path and rng.random() < 0.3:
            path[rng.randrange(len(path))] = "*"
        conditions.append(MatchCondition("prefix", tuple(path)))
    if rng.random() < 0.4:
        ns = rng.choice(NAMESPACES)
        conditions.append(MatchCondition("suffix", ns[-rng.randint(1, len(ns)) :]))
    return tuple(conditions)


def random_op(rng: random.Random) -> Op:
    kind = rng.choices(["put", "get", "delete", "search", "list"], weights=[5, 3, 1, 3, 2])[0]
    if kind == "put":
        return PutOp(
            rng.choice(NAMESPACES), rng.choice(KEYS), random_value(rng), index=rng.choice([None, False])
        )
    if kind == "delete":
        return PutOp(rng.choice(NAMESPACES), rng.choice(KEYS), None)
    if kind == "get":
        return GetOp(rng.choice(NAMESPACES), rng.choice(KEYS))
    if kind == "search":
        full = rng.random() < 0.7
        return SearchOp(
            random_prefix(rng),
            filter=random_filter(rng),
            limit=100 if full else rng.randint(1, 4),
            offset=0 if full else rng.randint(0, 3),
            query=rng.choice([None, None, " ".join(rng.sample(WORDS, 2))]),
        )
    return ListNamespacesOp(
        match_conditions=random_match(rng),
        max_depth=rng.choice([None, None, 1, 2, 3]),
        limit=rng.choice([100, 2, 3]),
        offset=rng.choice([0, 0, 1, 2]),
    )


def normalised(op: Op, result: Any) -> Any:
    """What the two stores must agree on for ``op``'s result."""

    def key(item: Item) -> tuple[Any, ...]:
        return (tuple(item.namespace), item.key, repr(sorted(item.value.items())))

    if isinstance(op, GetOp):
        return None if result is None else key(result)
    if isinstance(op, SearchOp):
        if op.offset == 0 and op.limit >= 100:
            return sorted(key(item) for item in result)
        return len(result)
    return result


@pytest.fixture
async def adapter(make_store: Callable[..., MemoryStore]) -> LangGraphStore:
    return LangGraphStore(make_store(embedder=HashingEmbedder()))


@pytest.mark.parametrize("seed", range(6))
async def test_random_operations_match_in_memory_store(adapter: LangGraphStore, seed: int) -> None:
    """Seeded random put/get/delete/search (filter, query, paging)/list_namespaces: same answers, step by step."""
    await check_random_operations(adapter.abatch, adapter, seed)


@pytest.mark.parametrize("seed", [100, 101])
async def test_random_operations_match_in_memory_store_sync(sync_adapter: LangGraphStore, seed: int) -> None:
    """The same through the sync ``batch`` on a SyncMemoryStore, called from a plain thread."""

    async def run(ops: list[Op]) -> list[Any]:
        return await asyncio.to_thread(sync_adapter.batch, ops)

    await check_random_operations(run, sync_adapter, seed)


async def check_random_operations(
    run: Callable[[list[Op]], Awaitable[list[Any]]], adapter: LangGraphStore, seed: int
) -> None:
    rng = random.Random(seed)
    reference = ReferenceStore()
    for step in range(70):
        ops = [random_op(rng) for _ in range(1 if rng.random() < 0.75 else rng.randint(2, 4))]
        expected = await reference.abatch(ops)
        got = await run(ops)
        for op, want, have in zip(ops, expected, got, strict=True):
            assert normalised(op, have) == normalised(op, want), (seed, step, op)
    # And the final state: every item of each namespace, and the namespace listing.
    for ns in NAMESPACES:
        op = SearchOp(ns, limit=100)
        assert normalised(op, await adapter.asearch(ns, limit=100)) == normalised(
            op, await reference.asearch(ns, limit=100)
        )
    assert await adapter.alist_namespaces(limit=100) == await reference.alist_namespaces(limit=100)


async def test_reads_in_a_batch_see_the_store_before_its_writes(adapter: LangGraphStore) -> None:
    """As in InMemoryStore: a get after a put of the same key in one batch returns the old value."""
    reference = ReferenceStore()
    ns = ("a", "b")
    for store in (reference, adapter):
        await store.aput(ns, "k", {"v": 1})
    ops: list[Op] = [
        PutOp(ns, "k", {"v": 2}),
        GetOp(ns, "k"),
        PutOp(ns, "k", {"v": 3}),
        SearchOp(("a",), filter={"v": 1}),
        ListNamespacesOp(match_conditions=(), limit=10),
    ]
    want = await reference.abatch(ops)
    got = await adapter.abatch(ops)
    assert [normalised(op, r) for op, r in zip(ops, got, strict=True)] == [
        normalised(op, r) for op, r in zip(ops, want, strict=True)
    ]
    item = await adapter.aget(ns, "k")
    assert item is not None and item.value == {"v": 3}  # the last put of the key wins


async def test_namespaces_listed_as_written_from_the_store(
    make_store: Callable[..., MemoryStore], unique_name: str
) -> None:
    """Hashed tags in the index, the namespaces as written out: read back by a second adapter, no shared state."""
    writer = LangGraphStore(make_store())
    odd = [("users", "a,b"), ("users", " padded "), ("users", "line\nbreak"), ("t", "ü", "東京")]
    for ns in odd:
        await writer.aput(ns, "k", {"text": "x"})
    reader = LangGraphStore(make_store())  # a fresh object over the same store name
    assert await reader.alist_namespaces() == sorted(odd)
    assert await reader.alist_namespaces(prefix=("users",), max_depth=1) == [("users",)]
    assert await reader.alist_namespaces(suffix=("line\nbreak",)) == [("users", "line\nbreak")]
    memory = await reader.store.get(item_id("langgraph", ("users", "a,b"), "k"))
    assert memory is not None and memory.metadata["langgraph"]["namespace"] == ["users", "a,b"]


async def test_search_limits_beyond_one_list_page(adapter: LangGraphStore) -> None:
    """``limit``/``offset`` past the store's 1,000-memory list page walk the prefix page by page."""
    for i in range(3):
        await adapter.aput(("p",), f"k{i}", {"text": f"item {i}"})
    assert len(await adapter.asearch(("p",), limit=1500)) == 3
    page = await adapter.asearch(("p",), offset=1, limit=1200)
    assert len(page) == 2 and {i.key for i in page} < {"k0", "k1", "k2"}
    assert len(await adapter.asearch(("p",), query="item", limit=1500)) == 3


async def test_a_bad_batch_writes_nothing(adapter: LangGraphStore) -> None:
    """A value the store refuses (NaN is not JSON) fails the batch before its deletes; an unknown op fails first."""
    await adapter.aput(("a",), "keep", {"v": 1})
    with pytest.raises(ValidationError):
        await adapter.abatch([PutOp(("a",), "keep", None), PutOp(("a",), "bad", {"v": float("nan")})])
    with pytest.raises(ValueError, match="Unknown operation"):
        await adapter.abatch([GetOp(("a",), "keep"), "not an op"])  # type: ignore[list-item]
    assert (await adapter.aget(("a",), "keep")) is not None
    assert await adapter.aget(("a",), "bad") is None


async def test_runs_as_the_stores_least_privilege_user(
    valkey_url: str, unique_name: str, text_client: avalkey.Valkey
) -> None:
    """Every operation, TTL refresh included, works with the store's ACL rules (none added) and leaves no denial."""
    user, password = f"u{unique_name}", "langgraph-pw"
    rules = list(dict.fromkeys(STORE_RULES.format(name=unique_name).split()))
    await text_client.execute_command("ACL", "SETUSER", user, "reset", "on", f">{password}", *rules)
    try:
        store = await MemoryStore.connect(
            _user_url(valkey_url, user, password),
            name=unique_name,
            embedder=HashingEmbedder(),
            discovery=False,
        )
        try:
            adapter = LangGraphStore(store)
            await adapter.aput(("u", "ada"), "k", {"text": "Ada takes the train"}, ttl=10)
            await adapter.aput(("u", "bob"), "k", {"text": "Bob drives"}, index=False)
            memory = await store.get(item_id("langgraph", ("u", "ada"), "k"))
            assert memory is not None and memory.expires_at is not None
            await adapter._refresh([memory])  # just written: not due, nothing rewritten
            assert await store.history(memory.id) == []
            await adapter._refresh(
                [replace(memory, expires_at=memory.expires_at - 120_000)]
            )  # 2 of 10 min passed
            refreshed = await store.get(memory.id)
            assert refreshed is not None and refreshed.expires_at is not None
            assert refreshed.expires_at >= memory.expires_at and len(await store.history(memory.id)) == 1
            assert (await adapter.aget(("u", "ada"), "k")) is not None
            assert len(await adapter.asearch(("u",), query="train")) == 2
            assert len(await adapter.asearch(("u",), filter={"text": "Bob drives"})) == 1
            assert await adapter.alist_namespaces(prefix=("u",)) == [("u", "ada"), ("u", "bob")]
            await adapter.adelete(("u", "ada"), "k")
            await adapter.adelete(("u", "bob"), "k")
            assert await adapter.alist_namespaces() == []
        finally:
            await store.close()
        assert await _denials(text_client, user) == []
    finally:
        await text_client.execute_command("ACL", "DELUSER", user)


async def test_scopes_separate_adapters_on_one_store(make_store: Callable[..., MemoryStore]) -> None:
    """Two adapters with different ``scope`` on one MemoryStore never see each other's items."""
    store = make_store()
    one, two = LangGraphStore(store, scope="one"), LangGraphStore(store, scope="two")
    await one.aput(("ns",), "k", {"text": "from one"})
    assert await two.aget(("ns",), "k") is None
    assert await two.asearch(("ns",)) == []
    assert await two.alist_namespaces() == []
    assert (await one.asearch(("ns",), query="from one"))[0].value == {"text": "from one"}


async def test_ttl_expires_an_item_and_listing_follows(make_store: Callable[..., MemoryStore]) -> None:
    """``put(ttl=)`` minutes become the memory's server-side TTL; expired items leave get, search and listing."""
    adapter = LangGraphStore(make_store())
    await adapter.aput(("t",), "short", {"v": 1}, ttl=1.5 / 60)
    await adapter.aput(("t",), "long", {"v": 2}, ttl=10)
    memory = await adapter.store.get(item_id("langgraph", ("t",), "short"))
    assert memory is not None and memory.expires_at is not None
    await asyncio.sleep(1.8)
    assert await adapter.aget(("t",), "short") is None
    assert [i.key for i in await adapter.asearch(("t",))] == ["long"]
    assert await adapter.alist_namespaces() == [("t",)]
    await adapter.adelete(("t",), "long")
    assert await adapter.alist_namespaces() == []


async def test_default_ttl_from_ttl_config(make_store: Callable[..., MemoryStore]) -> None:
    """``TTLConfig.default_ttl`` applies to puts that give no TTL."""
    adapter = LangGraphStore(make_store(), ttl={"default_ttl": 5, "refresh_on_read": False})
    await adapter.aput(("t",), "k", {"v": 1})
    memory = await adapter.store.get(item_id("langgraph", ("t",), "k"))
    assert memory is not None and memory.expires_at is not None
    assert 4 * 60_000 < memory.expires_at - memory.created_at <= 5 * 60_000


async def test_memories_are_ordinary_memories(make_store: Callable[..., MemoryStore]) -> None:
    """An item is an L2 memory: ``store.recall`` finds it, scoped to the adapter's namespace scope."""
    store = make_store()
    adapter = LangGraphStore(store, index={"fields": ["text"]})
    await adapter.aput(("ada",), "home", {"text": "Ada lives in Lisbon.", "since": 2019})
    hits = await store.recall("Where does Ada live?", namespace="langgraph", threshold=1.0)
    assert hits and hits[0].item.content == "Ada lives in Lisbon."
    assert hits[0].item.id == item_id("langgraph", ("ada",), "home")


async def test_embed_is_refused(make_store: Callable[..., MemoryStore]) -> None:
    """The store's embedder embeds: an ``index`` with its own ``embed`` is a ConfigurationError."""
    with pytest.raises(ConfigurationError):
        LangGraphStore(make_store(), index={"dims": 3, "embed": lambda texts: [[0.0] * 3 for _ in texts]})


async def test_sync_batch_over_an_async_store_needs_its_loop(make_store: Callable[..., MemoryStore]) -> None:
    """Sync ``batch`` over a ``MemoryStore``: on the store's own loop it refuses (it would wait for itself);
    with no running loop to hop onto it says to use SyncMemoryStore."""
    adapter = LangGraphStore(make_store())
    with pytest.raises(SyncReentrancyError):
        adapter.batch([GetOp(("a",), "k")])
    assert await asyncio.to_thread(adapter.batch, [GetOp(("a",), "k")]) == [None]
    adapter._loop = None  # as when built outside any event loop and never used by abatch
    with pytest.raises(ConfigurationError, match="SyncMemoryStore"):
        await asyncio.to_thread(adapter.batch, [GetOp(("a",), "k")])


# -- a graph that reads and writes memories through ``store`` ---------------------------------------


class State(TypedDict, total=False):
    user: str
    fact: str
    question: str
    answer: str


def build_graph(kind: str) -> StateGraph[State, None, State, State]:
    """remember the user's fact, then answer the question from the best-matching memory of that user."""

    async def remember(state: State, runtime: Runtime[None]) -> State:
        assert runtime.store is not None
        n = len(await runtime.store.asearch(("memories", state["user"]), limit=100))
        await runtime.store.aput(("memories", state["user"]), f"fact-{n}", {"text": state["fact"]})
        return {}

    async def answer(state: State, runtime: Runtime[None]) -> State:
        assert runtime.store is not None
        hits = await runtime.store.asearch(("memories", state["user"]), query=state["question"], limit=1)
        return {"answer": hits[0].value["text"] if hits else ""}

    def remember_sync(state: State, runtime: Runtime[None]) -> State:
        assert runtime.store is not None
        n = len(runtime.store.search(("memories", state["user"]), limit=100))
        runtime.store.put(("memories", state["user"]), f"fact-{n}", {"text": state["fact"]})
        return {}

    def answer_sync(state: State, runtime: Runtime[None]) -> State:
        assert runtime.store is not None
        hits = runtime.store.search(("memories", state["user"]), query=state["question"], limit=1)
        return {"answer": hits[0].value["text"] if hits else ""}

    graph: StateGraph[State, None, State, State] = StateGraph(State)
    if kind == "async":
        graph.add_node("remember", remember)
        graph.add_node("answer", answer)
    else:
        graph.add_node("remember", remember_sync)
        graph.add_node("answer", answer_sync)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "answer")
    graph.add_edge("answer", END)
    return graph


FACTS = [
    ("ada", "Ada takes the 7:40 train to Lisbon.", "When is Ada's train?"),
    ("ada", "Ada drinks green tea in the morning.", "What does Ada drink?"),
    ("bob", "Bob parks his blue car at the station.", "Where is Bob's car?"),
]


async def check_graph_run(invoke: Callable[[State], Any], adapter: LangGraphStore) -> None:
    for user, fact, question in FACTS:
        out = await invoke({"user": user, "fact": fact, "question": question})
        assert out["answer"] == fact, (user, question)
    # The last fact is Bob's; Ada's question still finds Ada's memory, never Bob's.
    out = await invoke({"user": "ada", "fact": "Ada likes jazz.", "question": "When is Ada's train?"})
    assert out["answer"] == "Ada takes the 7:40 train to Lisbon."
    assert await adapter.alist_namespaces() == [("memories", "ada"), ("memories", "bob")]
    assert len(await adapter.asearch(("memories", "ada"), limit=100)) == 3


async def test_graph_async_nodes_on_an_async_store(make_store: Callable[..., MemoryStore]) -> None:
    """``compile(store=...)`` with async nodes under ``ainvoke``: the store's own loop, no thread."""
    adapter = LangGraphStore(make_store())
    app = build_graph("async").compile(store=adapter)
    await check_graph_run(app.ainvoke, adapter)
    hits = await adapter.store.recall("Ada takes the train", namespace="langgraph", threshold=1.0)
    assert hits[0].item.content.startswith(
        '{"text": "Ada takes the 7:40 train'
    )  # fields "$": the value's JSON


async def test_graph_sync_nodes_under_ainvoke(make_store: Callable[..., MemoryStore]) -> None:
    """Sync nodes run in worker threads under ``ainvoke``: their ``batch`` hops onto the store's running loop."""
    adapter = LangGraphStore(make_store())
    app = build_graph("sync").compile(store=adapter)
    await check_graph_run(app.ainvoke, adapter)


@pytest.fixture
def sync_store(valkey_url: str, unique_name: str) -> Iterator[SyncMemoryStore]:
    store = SyncMemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder())
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def sync_adapter(sync_store: SyncMemoryStore) -> LangGraphStore:
    return LangGraphStore(sync_store)


async def test_graph_sync_invoke_on_a_sync_store(sync_adapter: LangGraphStore) -> None:
    """``invoke`` (no event loop of the caller's) with sync nodes: ``batch`` runs on SyncMemoryStore's loop."""
    app = build_graph("sync").compile(store=sync_adapter)

    async def invoke(state: State) -> Any:
        return await asyncio.to_thread(app.invoke, state)  # a plain thread, as a script would call it

    await check_graph_run(invoke, sync_adapter)


async def test_graph_async_nodes_on_a_sync_store(sync_adapter: LangGraphStore) -> None:
    """Async nodes over a SyncMemoryStore: ``abatch`` waits for the store's private loop from a worker thread."""
    app = build_graph("async").compile(store=sync_adapter)
    await check_graph_run(app.ainvoke, sync_adapter)


def test_missing_extra_is_a_configuration_error_naming_it() -> None:
    """Without ``langgraph`` the import says which extra to install (no bare ImportError)."""
    code = (
        "import sys; sys.modules['langgraph'] = None\n"
        "from betterdb_memory import ConfigurationError\n"
        "try:\n"
        "    import betterdb_memory.adapters.langgraph\n"
        "except ConfigurationError as exc:\n"
        "    assert exc.code == 'configuration.missing_extra' and exc.details['extra'] == 'langgraph', exc\n"
        "    assert \"pip install 'betterdb-memory[langgraph]'\" in str(exc)\n"
        "else:\n"
        "    raise SystemExit('imported')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_importing_the_package_loads_no_langgraph() -> None:
    code = (
        "import sys, betterdb_memory, betterdb_memory.adapters, betterdb_memory.sync\n"
        "bad = [m for m in ('langgraph', 'langchain_core') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
