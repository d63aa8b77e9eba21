"""The blocking API (``betterdb_memory.sync``) on the real engine: same calls, same errors, any thread."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import inspect
import threading
import weakref
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import (
    AgentMemory,
    AgentMemoryClosedError,
    BetterDBMemoryError,
    HashingEmbedder,
    MemoryStore,
    StoreClosedError,
    SyncAgentMemory,
    SyncMemoryStore,
    SyncReentrancyError,
    ValidationError,
)
from betterdb_memory.lifecycle import StoreState

pytestmark = pytest.mark.integration


@pytest.fixture
def sync_store(valkey_url: str, unique_name: str) -> Iterator[SyncMemoryStore]:
    store = SyncMemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder())
    try:
        yield store
    finally:
        store.close()


def loop_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("betterdb-memory-loop-")}


def public_members(cls: type) -> dict[str, object]:
    """Public members as the class shows them: a method the store takes from a part is its function."""
    return {
        k: v.__get__(None, cls) if hasattr(v, "fn") and hasattr(v, "__get__") else v
        for k, v in vars(cls).items()
        if not k.startswith("_")
    }


def evaluated_signature(fn: Any) -> inspect.Signature:
    try:
        return inspect.signature(fn, eval_str=True)
    except Exception:
        return inspect.signature(fn)


# -- the operations -------------------------------------------------------------------------


def test_remember_recall_get_forget_count_list(sync_store: SyncMemoryStore) -> None:
    """The long-term operations block and return what the coroutines return."""
    mid = sync_store.remember("Ada lives in Lisbon.", importance=0.9, thread_id="ada", tags=["home"])
    other = sync_store.remember("Ada likes green tea.", thread_id="ada")
    assert isinstance(mid, str) and mid != other

    hits = sync_store.recall("Where does Ada live in Lisbon?", thread_id="ada", threshold=2.0)
    assert hits and hits[0].item.id == mid

    item = sync_store.get(mid)
    assert item is not None and item.content == "Ada lives in Lisbon." and item.tags == ["home"]
    assert sync_store.count(thread_id="ada") == 2
    page = sync_store.list(thread_id="ada", limit=10)
    assert page.total == 2 and {i.id for i in page.items} == {mid, other}

    assert sync_store.forget(mid) is True
    assert sync_store.get(mid) is None
    assert sync_store.count(thread_id="ada") == 1
    assert sync_store.state is StoreState.READY


def test_store_turn_and_retrieve_context(sync_store: SyncMemoryStore) -> None:
    """The short-term tier through the sync API: turns, recent turns, a budgeted context."""
    sync_store.remember("Ada lives in Lisbon.", thread_id="t1", agent_id="assistant")
    turn_id = sync_store.store_turn("t1", "Where do I live?", "In Lisbon.", agent_id="assistant")
    assert isinstance(turn_id, str)
    turns = sync_store.get_recent_turns("t1", agent_id="assistant")
    assert [(t.user_message, t.assistant_message) for t in turns] == [("Where do I live?", "In Lisbon.")]

    ctx = sync_store.retrieve_context("t1", "Lisbon", token_budget=2048, agent_id="assistant")
    rendered = ctx.render()
    assert "User: Where do I live?" in rendered and "Assistant: In Lisbon." in rendered


def test_errors_propagate_as_the_same_typed_exceptions(sync_store: SyncMemoryStore) -> None:
    """A refusal of the async store reaches the caller's thread as the same class, code and details."""
    with pytest.raises(ValidationError) as err:
        sync_store.remember("x", thread_id="a,b")
    assert err.value.code.startswith("validation.")
    with pytest.raises(TypeError):
        sync_store.remember("x", no_such_option=1)  # type: ignore[call-arg]


def test_plain_methods_and_properties_are_forwarded(sync_store: SyncMemoryStore) -> None:
    """Plain methods run on the loop thread; properties and settings read and write through."""
    assert sync_store.current_config() == sync_store.async_store.current_config()
    assert sync_store.effective_threshold(0.5) == 0.5
    assert sync_store.name == sync_store.async_store.name
    assert sync_store.dedup is False
    sync_store.consolidation_lock_ttl = 12.0
    assert sync_store.async_store.consolidation_lock_ttl == 12.0
    with pytest.raises(AttributeError):
        sync_store.state = StoreState.NEW  # type: ignore[assignment]
    assert not hasattr(sync_store, "client")  # an async client is of no use in the caller's thread


# -- threads and loops ----------------------------------------------------------------------


def test_eight_threads_remember_at_once(sync_store: SyncMemoryStore) -> None:
    """8 threads x 20 remembers on one sync store: every write lands, ids distinct."""

    def writer(n: int) -> list[str]:
        return [sync_store.remember(f"note {n}-{i}", thread_id="busy") for i in range(20)]

    with ThreadPoolExecutor(8) as pool:
        ids = [mid for batch in pool.map(writer, range(8)) for mid in batch]
    assert len(set(ids)) == 160
    assert sync_store.count(thread_id="busy") == 160


async def test_calls_from_inside_a_running_event_loop_do_not_deadlock(
    valkey_url: str, unique_name: str
) -> None:
    """A notebook cell or asyncio.run: the sync API called directly from a coroutine works."""
    running = asyncio.get_running_loop()
    with SyncMemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder()) as store:
        mid = store.remember("called from a running loop", thread_id="nb")
        assert store.get(mid) is not None
        assert store.count(thread_id="nb") == 1
        assert [h.item.id for h in store.recall("running loop", thread_id="nb", threshold=2.0)] == [mid]
    assert asyncio.get_running_loop() is running
    await asyncio.sleep(0)  # this loop still runs


def test_a_call_from_the_stores_own_loop_thread_is_refused(valkey_url: str, unique_name: str) -> None:
    """An embed_fn that calls the sync API of its own store gets SyncReentrancyError, not a hang."""
    holder: dict[str, SyncMemoryStore] = {}

    async def embed(text: str) -> list[float]:
        holder["store"].count()  # runs on the store's loop thread
        return [1.0, 0.0, 0.0]

    store = SyncMemoryStore.connect(valkey_url, name=unique_name, embed_fn=embed, dimensions=3)
    holder["store"] = store
    try:
        with pytest.raises(BetterDBMemoryError) as err:
            store.remember("x")
        chain: list[BaseException] = []
        exc: BaseException | None = err.value
        while exc is not None:
            chain.append(exc)
            exc = exc.__cause__ or exc.__context__
        found = [e for e in chain if isinstance(e, SyncReentrancyError)]
        assert found and found[0].code == "state.reentrant_sync_call"
        assert isinstance(found[0], RuntimeError)
    finally:
        store.close()


# -- lifecycle ------------------------------------------------------------------------------


def test_close_is_idempotent_and_later_calls_raise_store_closed(valkey_url: str, unique_name: str) -> None:
    """close() closes the async store, stops and joins its thread; afterwards every call raises."""
    before = loop_threads()
    store = SyncMemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder())
    mid = store.remember("before close")
    (thread,) = loop_threads() - before
    store.close()
    store.close()
    assert not thread.is_alive()
    assert store.state is StoreState.CLOSED
    for call in (lambda: store.remember("after"), lambda: store.get(mid), lambda: store.count()):
        with pytest.raises(StoreClosedError) as err:
            call()
        assert err.value.code == "state.closed"


def test_close_while_other_threads_call(valkey_url: str, unique_name: str) -> None:
    """Threads busy on the store when it closes end with results or StoreClosedError, never a hang."""
    store = SyncMemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder())
    store.remember("warm up")
    started = threading.Barrier(5)

    def caller() -> str:
        started.wait()
        while True:
            try:
                store.count()
            except StoreClosedError:
                return "closed"

    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(caller) for _ in range(4)]
        started.wait()
        store.close()
        assert [f.result(timeout=30) for f in futures] == ["closed"] * 4


def test_an_abandoned_store_is_closed_when_collected(valkey_url: str, unique_name: str) -> None:
    """Dropping the last reference without close() closes the async store and stops the thread."""
    before = loop_threads()
    store = SyncMemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder())
    store.remember("forgotten to close")
    inner = store.async_store
    (thread,) = loop_threads() - before
    ref = weakref.ref(store)
    del store
    gc.collect()
    assert ref() is None
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert inner.state is StoreState.CLOSED


def test_the_constructor_refuses_a_client(client: avalkey.Valkey) -> None:
    """A client made outside the private loop is refused with a pointer to connect / wrap."""
    with pytest.raises(TypeError, match=r"connect\(url, \.\.\.\) or SyncMemoryStore\.wrap"):
        SyncMemoryStore(client=client)


def test_wrap_runs_the_factory_on_the_private_loop(valkey_url: str, unique_name: str) -> None:
    """wrap(): the factory's client is built on the private loop; close() runs the factory's exit."""
    seen: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def open_store() -> AsyncIterator[MemoryStore]:
        seen["thread"] = threading.current_thread().name
        async with avalkey.Valkey.from_url(valkey_url) as c:
            async with MemoryStore(client=c, name=unique_name, embedder=HashingEmbedder()) as s:
                yield s
            seen["client_closed"] = True

    with SyncMemoryStore.wrap(open_store) as store:
        store.remember("wrapped", thread_id="w")
        assert store.count(thread_id="w") == 1
    assert seen["thread"].startswith("betterdb-memory-loop-") and seen["client_closed"]

    # a plain async factory, and a factory building the store directly, work too
    async def build() -> MemoryStore:
        return await MemoryStore.connect(valkey_url, name=unique_name, embedder=HashingEmbedder())

    with SyncMemoryStore.wrap(build) as store:
        assert store.count(thread_id="w") == 1

    with pytest.raises(TypeError, match="not MemoryStore"):
        SyncMemoryStore.wrap(lambda: AgentMemory.connect(valkey_url, embedder=HashingEmbedder()))  # type: ignore[arg-type, return-value]


# -- the generated surface ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sync_cls", "async_cls"), [(SyncMemoryStore, MemoryStore), (SyncAgentMemory, AgentMemory)]
)
def test_every_public_method_is_generated_with_the_same_signature_and_doc(
    sync_cls: type[Any], async_cls: type[Any]
) -> None:
    """Every public coroutine method of the async class is a blocking method with its parameters and doc."""
    coroutines: dict[str, Any] = {
        name: member
        for name, member in public_members(async_cls).items()
        if inspect.iscoroutinefunction(member)
    }
    assert "remember" in coroutines or "initialize" in coroutines
    for name, member in coroutines.items():
        sync = getattr(sync_cls, name)
        assert not inspect.iscoroutinefunction(sync), name
        if name == "close":  # the sync close also stops the loop thread: its own doc, no parameters either
            assert list(inspect.signature(sync).parameters) == list(inspect.signature(member).parameters)
            continue
        assert sync.__doc__ == member.__doc__, name
        assert inspect.signature(sync) == evaluated_signature(member), name
    for name, attr in public_members(async_cls).items():
        if isinstance(attr, property) and name not in sync_cls._not_forwarded:
            assert isinstance(getattr(sync_cls, name), property), name
    connect = inspect.signature(sync_cls.connect)
    assert list(connect.parameters.values()) == list(
        evaluated_signature(async_cls.connect).parameters.values()
    )
    assert connect.return_annotation is sync_cls
    assert sync_cls.connect.__doc__ == async_cls.connect.__doc__


# -- the facade ------------------------------------------------------------------------------


def test_sync_agent_memory(valkey_url: str, unique_name: str) -> None:
    """SyncAgentMemory: with initialises, .memory is a sync store, the cache tiers block, close closes all."""
    with SyncAgentMemory.connect(valkey_url, name=unique_name, embedder=HashingEmbedder()) as agent:
        assert agent.name == unique_name
        memory = agent.memory
        assert isinstance(memory, SyncMemoryStore) and memory is agent.memory
        memory.remember("Ada lives in Lisbon.", thread_id="ada", agent_id="assistant")
        assert memory.count(agent_id="assistant") == 1
        agent.session.set("ada", "mood", "curious")
        assert agent.session.get("ada", "mood") == "curious"
        assert agent.cache.session.get("ada", "mood") == "curious"
        removed = agent.erase(agent_id="assistant", thread_id="ada")
        assert removed >= 2
        assert memory.count(agent_id="assistant") == 0
    assert agent.closed is True
    with pytest.raises(AgentMemoryClosedError):
        agent.erase(agent_id="assistant")
    with pytest.raises(StoreClosedError):
        memory.count()
