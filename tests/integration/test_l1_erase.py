"""Right to erasure on the real engine: nothing of the agent is left, nothing of others is touched."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .test_l1_support import keys_of, summaries_of

pytestmark = pytest.mark.integration


def _store_level(store: Any) -> set[str]:
    """Keys that belong to the store, not to any agent (they may change during the test)."""
    k = store.keys
    return {k.meta, k.stats, k.config}


async def _values_naming(client: Any, name: str, raw_id: bytes) -> list[str]:
    """Keys of store ``name`` holding ``raw_id`` as a value or a JSON string (vectors skipped)."""
    found: list[str] = []
    for key in sorted(await keys_of(client, name)):
        kind = (await client.type(key)).decode()
        if kind == "hash":
            values = [v for f, v in (await client.hgetall(key)).items() if f != b"vector"]
        elif kind == "list":
            values = await client.lrange(key, 0, -1)
        elif kind in ("set", "zset"):
            values = list(await client.smembers(key)) if kind == "set" else await client.zrange(key, 0, -1)
        else:
            values = [await client.get(key)] if kind == "string" else []
        if any(v == raw_id or b'"' + raw_id + b'"' in v for v in values if v is not None):
            found.append(key)
    return found


async def _populate_agent(store: Any, agent: str) -> None:
    for thread in ("t1", "t2", "t3"):
        for i in range(6):
            await store.store_turn(
                thread, f"{agent} asks {thread} question {i}", f"answer {i}", agent_id=agent
            )
        await store.summarize_session(thread, agent_id=agent)
    await store.remember(f"{agent} likes green tea", agent_id=agent)
    await store.remember(f"{agent} works at Acme", agent_id=agent, namespace="work")
    await store.remember(f"{agent} said something in t1", agent_id=agent, thread_id="t1", sensitivity="pii")


async def test_erase_agent_leaves_no_key_behind(make_store: Any, client: Any, unique_name: str) -> None:
    """Every key of agent A (sessions, summaries, memories, bookkeeping) goes; agent B's stay as they were.

    There is no scope registry any more (counts read the index); instead no value left
    anywhere in the store names agent A.
    """
    store = make_store(max_session_turns=2, summarize_batch=2)
    await store.store_turn("tb", "B's question", "B's answer", agent_id="B")
    await store.remember("B likes coffee", agent_id="B", namespace="work")
    before = await keys_of(client, unique_name) - _store_level(store)

    await _populate_agent(store, "A")
    l2 = await store.count(agent_id="A")
    l1_turns = 0
    for thread in ("t1", "t2", "t3"):
        l1_turns += (await store.get_session_metadata(thread, agent_id="A")).retained_turns
    assert l2 == 3 + 3 * 2 and l1_turns == 3 * 2  # 2 summaries per thread, window of 2 turns each

    assert await _values_naming(client, unique_name, b"A")  # the check sees A's memories
    assert await store.erase(agent_id="A") == l1_turns + l2
    after = await keys_of(client, unique_name) - _store_level(store)
    assert after == before
    assert await _values_naming(client, unique_name, b"A") == []  # no raw id of A left anywhere
    assert await store.count(agent_id="A") == 0
    assert [t.user_message for t in await store.get_recent_turns("tb", agent_id="B")] == ["B's question"]
    assert await store.count(agent_id="B") == 1


async def test_erase_one_thread_keeps_the_others(make_store: Any) -> None:
    """thread_id narrows erasure to that thread's turns, summaries and memories."""
    store = make_store(max_session_turns=2, summarize_batch=2)
    await _populate_agent(store, "A")
    t1_l2 = await store.count(agent_id="A", thread_id="t1")
    assert await store.erase(agent_id="A", thread_id="t1") == t1_l2 + 2
    assert await store.get_session_metadata("t1", agent_id="A") is None
    assert await summaries_of(store, "t1", "A") == []
    assert len(await store.get_recent_turns("t2", agent_id="A")) == 2
    assert len(await summaries_of(store, "t2", "A")) == 2
    assert await store.count(agent_id="A") == 2 + 2 * 2  # agent + ns memories, t2 and t3 summaries


async def test_erase_cancels_a_summary_in_flight(make_store: Any, client: Any, unique_name: str) -> None:
    """A summary running in this process when erase starts never writes afterwards."""
    gate = asyncio.Event()
    started = asyncio.Event()

    class Gated:
        async def summarize(self, turns: Any) -> str:
            started.set()
            await gate.wait()
            return "should never be stored"

    store = make_store(max_session_turns=2, summarize_batch=2, summarizer=Gated())
    for i in range(4):
        await store.store_turn("t", f"q{i}", f"a{i}", agent_id="A")
    await asyncio.wait_for(started.wait(), timeout=5)
    assert await store.erase(agent_id="A") == 4
    gate.set()
    await asyncio.sleep(0.1)
    assert await store.count(agent_id="A") == 0
    assert not any(":l1:" in k for k in await keys_of(client, unique_name))
