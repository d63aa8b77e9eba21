"""The store's lifecycle: calls after ``close()`` raise ``StoreClosedError``; close is idempotent."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import Any

import pytest

from betterdb_memory import (
    AgentMemory,
    AgentMemoryClosedError,
    HashingEmbedder,
    MemoryStore,
    StoreClosedError,
    SyncMemoryStore,
)
from betterdb_memory.lifecycle import StoreState


async def test_every_operation_after_close_raises(client: Any, unique_name: str) -> None:
    store = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder())
    mid = await store.remember("before close", thread_id="t")
    await store.close()
    await store.close()  # idempotent
    calls = [
        store.remember("after", thread_id="t"),
        store.recall("after", thread_id="t"),
        store.get(mid),
        store.get_many([mid]),
        store.forget(mid),
        store.forget_by_scope(thread_id="t"),
        store.count(thread_id="t"),
        store.list(thread_id="t"),
        store.stats(),
        store.ensure_index(),
    ]
    for coro in calls:
        with pytest.raises(StoreClosedError) as err:
            await coro
        assert err.value.code == "state.closed"
    # nothing was written or deleted after close
    assert await client.exists(f"{unique_name}:mem:{mid}") == 1


async def test_a_closed_store_leaves_the_callers_client_open(client: Any, unique_name: str) -> None:
    async with MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder()) as store:
        await store.remember("x")
    assert await client.ping()


# -- CLOSING: from the first line of close(), every public coroutine method is refused ------------


def public_coroutine_methods(cls: type) -> list[str]:
    """Every public coroutine method of ``cls`` but ``close`` and the constructors, found by introspection."""
    names = []
    for name in dir(cls):
        if name.startswith("_") or name == "close":
            continue
        if isinstance(inspect.getattr_static(cls, name), classmethod):
            continue
        if inspect.iscoroutinefunction(getattr(cls, name)):
            names.append(name)
    return names


def placeholder_call(fn: Any) -> tuple[list[Any], dict[str, Any]]:
    """Arguments for ``fn``'s required parameters (any value: the gate answers before they are read)."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in inspect.signature(fn).parameters.values():
        if p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = "x"
        else:
            args.append("x")
    return args, kwargs


class HeldSummarizer:
    """A summariser that holds its background job until released (close must drain it)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.calls = 0

    async def summarize(self, turns: Any) -> str:
        self.started.set()
        while not self.release.is_set():
            await asyncio.sleep(0.005)
        self.calls += 1
        return "summary written while closing"


async def start_held_summary(store: Any, summarizer: HeldSummarizer) -> None:
    for i in range(4):
        await store.store_turn("t", f"q{i}", f"a{i}")
    while not summarizer.started.is_set():  # the rolling summary runs in the background
        await asyncio.sleep(0.005)


async def assert_every_method_refused(obj: Any, cls: type, error: type[BaseException]) -> None:
    names = public_coroutine_methods(cls)
    assert names, cls
    for name in names:
        args, kwargs = placeholder_call(getattr(cls, name))
        with pytest.raises(error) as err:
            await getattr(obj, name)(*args[1:], **kwargs)  # args[0] stands for self
        assert err.value.code.startswith("state."), name


def test_every_public_coroutine_method_is_gated() -> None:
    """The gate covers every public coroutine method, found by introspection (a new one cannot forget it)."""
    names = public_coroutine_methods(MemoryStore)
    assert {"remember", "recall", "stats", "summarize_session", "ensure_index", "refresh_config"} <= set(
        names
    )
    assert len(names) > 30
    assert public_coroutine_methods(AgentMemory) == ["erase", "initialize"]


async def test_store_is_closing_while_background_work_drains(make_store: Any, client: Any) -> None:
    """close(): state CLOSING at once, every call refused while a summary drains, then CLOSED; the summary lands."""
    summarizer = HeldSummarizer()
    store = make_store(max_session_turns=2, summarize_batch=2, summarizer=summarizer)
    mid = await store.remember("before close", thread_id="t")
    await start_held_summary(store, summarizer)
    assert store.state is StoreState.READY

    closing = asyncio.create_task(store.close())
    await asyncio.sleep(0)  # close() has run up to its first wait
    assert store.state is StoreState.CLOSING
    await assert_every_method_refused(store, MemoryStore, StoreClosedError)
    assert store.name and store.default_threshold and store.half_life_seconds  # configuration stays readable
    assert not closing.done()

    summarizer.release.set()
    await closing
    assert store.state is StoreState.CLOSED
    assert summarizer.calls == 1  # background work drained instead of being cut
    await store.close()  # idempotent
    assert await client.exists(f"{store.name}:mem:{mid}") == 1


async def test_facade_is_refused_while_its_store_drains(make_store: Any) -> None:
    summarizer = HeldSummarizer()
    store = make_store(max_session_turns=2, summarize_batch=2, summarizer=summarizer)
    agent = AgentMemory(store=store, cache_discovery=None)
    await start_held_summary(store, summarizer)

    closing = asyncio.create_task(agent.close())
    for _ in range(1000):  # the facade stops its cache tiers first, then closes the store
        if store.state is StoreState.CLOSING:
            break
        await asyncio.sleep(0.005)
    assert store.state is StoreState.CLOSING and agent.closed
    await assert_every_method_refused(agent, AgentMemory, AgentMemoryClosedError)
    await assert_every_method_refused(store, MemoryStore, StoreClosedError)
    summarizer.release.set()
    await closing
    assert store.state is StoreState.CLOSED


def test_sync_store_shows_closing_and_refuses_calls(valkey_url: str, unique_name: str) -> None:
    summarizer = HeldSummarizer()
    sync = SyncMemoryStore.connect(
        valkey_url,
        name=unique_name,
        embedder=HashingEmbedder(),
        summarizer=summarizer,
        max_session_turns=2,
        summarize_batch=2,
    )
    for i in range(4):
        sync.store_turn("t", f"q{i}", f"a{i}")
    assert summarizer.started.wait(timeout=60)
    closer = threading.Thread(target=sync.close)
    closer.start()
    try:
        for _ in range(10_000):
            if sync.state is StoreState.CLOSING:
                break
            time.sleep(0.005)
        assert sync.state is StoreState.CLOSING
        for name in public_coroutine_methods(MemoryStore):
            args, kwargs = placeholder_call(getattr(MemoryStore, name))
            with pytest.raises(StoreClosedError):
                getattr(sync, name)(*args[1:], **kwargs)
    finally:
        summarizer.release.set()
        closer.join()
    assert sync.state is StoreState.CLOSED and summarizer.calls == 1
