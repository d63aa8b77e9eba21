"""L1 turns on the real engine: append, read, metadata, TTLs, isolation, concurrency, validation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, MemoryStore, ValidationError
from betterdb_memory.core.turns import ToolResult
from betterdb_memory.errors import ConfigurationError

from .test_l1_support import summaries_of

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("decode", [False, True])
async def test_turns_roundtrip_oldest_first(decode: bool, valkey_url: str, unique_name: str) -> None:
    """Turns come back in order with every field, whether the client decodes replies or not."""
    own = avalkey.Valkey.from_url(valkey_url, decode_responses=decode)
    store = MemoryStore(client=own, name=unique_name, embedder=HashingEmbedder())
    try:
        tool = ToolResult("weather", {"city": "Oslo"}, {"temp": -3}, True, 12)
        ids = [
            await store.store_turn("t", "Hi, I am Ada.", "Hello Ada!", agent_id="a"),
            await store.store_turn("t", "Weather in Oslo?", "It is -3°C.", agent_id="a", tool_results=[tool]),
        ]
        turns = await store.get_recent_turns("t", agent_id="a")
        assert [t.id for t in turns] == ids and all(len(i) == 32 for i in ids)
        assert [t.seq for t in turns] == [1, 2]
        assert turns[1].user_message == "Weather in Oslo?" and turns[1].assistant_message == "It is -3°C."
        assert turns[1].tool_results == (tool,)
        assert turns[0].token_count > 0 and turns[0].thread_id == "t"
        assert [t.id for t in await store.get_recent_turns("t", agent_id="a", n=1)] == ids[1:]
        meta = await store.get_session_metadata("t", agent_id="a")
        assert meta is not None and meta.turn_count == 2
    finally:
        await store.close()
        await own.aclose()


async def test_session_metadata_counts_and_none_when_absent(make_store: Any) -> None:
    store = make_store()
    assert await store.get_session_metadata("t") is None
    for i in range(3):
        await store.store_turn("t", f"q{i}", f"a{i}")
    meta = await store.get_session_metadata("t")
    assert meta is not None
    assert (meta.turn_count, meta.retained_turns, meta.agent_id, meta.thread_id) == (3, 3, None, "t")
    assert (
        meta.created_at is not None and meta.last_active is not None and meta.created_at <= meta.last_active
    )


async def test_clear_session_removes_l1_only(make_store: Any) -> None:
    store = make_store()
    await store.store_turn("t", "q", "a", agent_id="x")
    await store.clear_session("t", agent_id="x")
    assert await store.get_recent_turns("t", agent_id="x") == []
    assert await store.get_session_metadata("t", agent_id="x") is None


async def test_ttl_is_refreshed_on_every_key(make_store: Any, client: Any) -> None:
    """Every key of a session, and the agent's session set, expire session_ttl after the last turn."""
    store = make_store(session_ttl=100, max_session_turns=2, summarize_batch=1)
    for i in range(5):
        await store.store_turn("t", f"question {i}", f"answer {i}", agent_id="a")
    await store.summarize_session("t", agent_id="a")
    await store.store_turn("t", "last", "one", agent_id="a")
    sk = store.keys.session("a", "t")
    for key in (sk.turns, sk.meta, sk.summary_cursor, store.keys.agent_sessions("a")):
        ttl = await client.pttl(key)
        assert 90_000 < ttl <= 100_000, key


async def test_ids_with_separators_never_collide(make_store: Any) -> None:
    """(agent 'a::b', thread 'c') and (agent 'a', thread 'b::c') are two sessions, braces too."""
    store = make_store()
    pairs = [("a::b", "c"), ("a", "b::c"), ("{a}", "c"), ("a", "{c}"), (None, "a::b::c")]
    for agent, thread in pairs:
        await store.store_turn(thread, f"user {agent}/{thread}", "ok", agent_id=agent)
    for agent, thread in pairs:
        turns = await store.get_recent_turns(thread, agent_id=agent)
        assert [t.user_message for t in turns] == [f"user {agent}/{thread}"]


async def test_window_without_summaries_trims_to_max_turns(make_store: Any) -> None:
    """summarize_batch=0: L1 is a plain window of the last max_session_turns turns."""
    store = make_store(max_session_turns=5, summarize_batch=0)
    ids = [await store.store_turn("t", f"q{i}", f"a{i}") for i in range(12)]
    assert [t.id for t in await store.get_recent_turns("t")] == ids[-5:]
    meta = await store.get_session_metadata("t")
    assert meta.turn_count == 12 and meta.retained_turns == 5


async def test_concurrent_writers_lose_nothing(make_store: Any) -> None:
    """200 concurrent store_turn calls: exact turn_count, unique seqs, every turn live or summarised."""
    store = make_store(max_session_turns=50, summarize_batch=20)
    ids = await asyncio.gather(
        *(store.store_turn("t", f"question {i}", f"answer {i}", agent_id="a") for i in range(200))
    )
    await store.summarize_session("t", agent_id="a")
    meta = await store.get_session_metadata("t", agent_id="a")
    assert meta.turn_count == 200 and meta.dropped_turns == 0 and meta.summary_failures == 0
    live = await store.get_recent_turns("t", agent_id="a")
    assert [t.seq for t in live] == list(range(151, 201))
    summaries = await summaries_of(store, "t", "a")
    summarised = [i for s in summaries for i in s.metadata["turn_ids"]]
    assert len(summarised) == len(set(summarised)) == 150
    assert set(summarised) | {t.id for t in live} == set(ids)


class _Failing:
    def __init__(self) -> None:
        self.calls = 0

    async def summarize(self, turns: Any) -> str:
        self.calls += 1
        raise RuntimeError("summariser down")


async def test_failing_summarizer_keeps_turns_counts_failures_and_caps(make_store: Any, caplog: Any) -> None:
    """Failures are counted and logged; turns wait in L1 up to the hard cap, then drops are counted."""
    failing = _Failing()
    store = make_store(max_session_turns=5, summarize_batch=2, max_unsummarized=4, summarizer=failing)
    with caplog.at_level("WARNING", logger="betterdb_memory.tiers.summaries"):
        for i in range(8):
            await store.store_turn("t", f"q{i}", f"a{i}")
        await asyncio.sleep(0.2)
    meta = await store.get_session_metadata("t")
    assert failing.calls >= 1 and meta.summary_failures >= 1
    assert meta.retained_turns == 8 and meta.dropped_turns == 0  # 5 window + 3 waiting, under the cap of 9
    assert "summariser down" in caplog.text
    for i in range(8, 12):
        await store.store_turn("t", f"q{i}", f"a{i}")
    meta = await store.get_session_metadata("t")
    assert meta.retained_turns == 9 and meta.dropped_turns == 3 and meta.summarized_through == 3


async def test_close_drains_running_summaries(make_store: Any, unique_name: str) -> None:
    """close() waits for a slow summary within the grace period; past it, cancels."""

    class Slow:
        def __init__(self, delay: float) -> None:
            self.delay = delay
            self.done = 0

        async def summarize(self, turns: Any) -> str:
            await asyncio.sleep(self.delay)
            self.done += 1
            return "slow summary"

    slow = Slow(0.3)
    store = make_store(name=unique_name, max_session_turns=2, summarize_batch=2, summarizer=slow)
    for i in range(4):
        await store.store_turn("t", f"q{i}", f"a{i}")
    await store.close()
    assert slow.done == 1

    stuck = Slow(30)
    other = make_store(
        name=unique_name + "b", max_session_turns=2, summarize_batch=2, summarizer=stuck, shutdown_grace=0.1
    )
    for i in range(4):
        await other.store_turn("t", f"q{i}", f"a{i}")
    await asyncio.wait_for(other.close(), timeout=5)
    assert stuck.done == 0


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda s: s.store_turn("", "u", "a"), "validation.empty"),
        (lambda s: s.store_turn("  ", "u", "a"), "validation.empty"),
        (lambda s: s.store_turn("t", "", "a"), "validation.empty"),
        (lambda s: s.store_turn("t", "u", " \n"), "validation.empty"),
        (lambda s: s.store_turn("t", "u", "a", agent_id=""), "validation.empty"),
        (lambda s: s.store_turn(None, "u", "a"), "validation.type"),
        (lambda s: s.store_turn("t", "u", "a", tool_results=[{"tool_name": ""}]), "validation.tool_result"),
        (lambda s: s.get_recent_turns("t", n=0), "validation.range"),
        (lambda s: s.get_recent_turns("t", n=True), "validation.type"),
        (lambda s: s.retrieve_context("t", "q", token_budget=0), "validation.budget"),
        (lambda s: s.retrieve_context("t", "q", token_budget=-5), "validation.budget"),
        (lambda s: s.retrieve_context("t", "q", token_budget=True), "validation.budget"),
        (lambda s: s.retrieve_context("t", "q", token_budget=100.0), "validation.budget"),
        (lambda s: s.retrieve_context("t", "", token_budget=100), "validation.empty"),
        (
            lambda s: s.retrieve_context("t", "q", token_budget=100, redact=["secret"]),
            "validation.sensitivity",
        ),
        (lambda s: s.erase(agent_id=""), "validation.empty"),
        (lambda s: s.erase(agent_id=None), "validation.type"),
    ],
)
async def test_bad_arguments_fail_before_any_io(call: Any, code: str) -> None:
    """Validation errors come first: the store's client points at a closed port, so any I/O would fail differently."""
    dead = avalkey.Valkey(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    store = MemoryStore(client=dead, name="dead", embedder=HashingEmbedder())
    try:
        with pytest.raises(ValidationError) as info:
            await call(store)
        assert info.value.code == code
    finally:
        await store.close()
        await dead.aclose()


async def test_extract_without_extractor_is_a_configuration_error(make_store: Any) -> None:
    store = make_store()
    with pytest.raises(ConfigurationError):
        await store.extract_memories("t")


async def test_l1_scripts_come_back_after_script_flush(make_store: Any, client: Any) -> None:
    """SCRIPT FLUSH (as after a restart or failover): store_turn, metadata and clear_session reload and work once."""
    store = make_store(max_session_turns=3, summarize_batch=0)
    await store.store_turn("t", "q0", "a0")
    await client.script_flush()
    await store.store_turn("t", "q1", "a1")  # the pipeline meets NOSCRIPT, loads, runs again
    meta = await store.get_session_metadata("t")
    assert meta.turn_count == 2 and meta.retained_turns == 2  # the turn was appended exactly once
    assert [t.user_message for t in await store.get_recent_turns("t")] == ["q0", "q1"]
    await client.script_flush()
    await store.clear_session("t")
    assert await store.get_session_metadata("t") is None


@pytest.mark.parametrize(
    "options",
    [
        {"session_ttl": 0},
        {"max_session_turns": 0},
        {"summarize_batch": -1},
        {"summarize_batch": 10, "max_unsummarized": 5},
        {"summarizer": object()},
        {"token_counter": "tiktoken"},
        {"redact": ["nope"]},
        {"budget": {"system": 0.3}},
        {"shutdown_grace": -1},
    ],
)
def test_bad_configuration_is_refused(options: dict[str, Any]) -> None:
    """Each L1 option passed to MemoryStore is checked at construction."""
    with pytest.raises(ConfigurationError):
        MemoryStore(
            client=avalkey.Valkey(host="127.0.0.1", port=1), name="cfg", embedder=HashingEmbedder(), **options
        )
