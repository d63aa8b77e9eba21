"""Rolling summaries on the real engine: nothing lost, metadata, recovery, an LLM summariser over HTTP."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from .test_l1_support import ChatServer, summaries_of

pytestmark = pytest.mark.integration


async def _settled(store: Any, thread: str, agent: str | None, *, window: int, batch: int) -> Any:
    """Wait until the background summaries have caught up (fewer than one batch pending)."""
    deadline = time.monotonic() + 30
    while True:
        meta = await store.get_session_metadata(thread, agent_id=agent)
        if meta.turn_count - window - meta.summarized_through < batch or time.monotonic() > deadline:
            return meta
        await asyncio.sleep(0.02)


@pytest.mark.slow
async def test_thousand_turns_are_all_covered(make_store: Any) -> None:
    """1,000 turns: each one is in L1 or in exactly one summary, and summaries tile the history in order."""
    store = make_store()  # defaults: window 50, batch 20
    ids = [
        await store.store_turn(
            "long", f"Question {i}: what about item {i}?", f"Item {i} is fine.", agent_id="a"
        )
        for i in range(1000)
    ]
    meta = await _settled(store, "long", "a", window=50, batch=20)
    assert meta.turn_count == 1000 and meta.dropped_turns == 0 and meta.summary_failures == 0
    assert meta.summarized_through == 940

    live = await store.get_recent_turns("long", agent_id="a")
    summaries = await summaries_of(store, "long", "a")
    in_summaries = [i for s in summaries for i in s.metadata["turn_ids"]]
    assert len(in_summaries) == len(set(in_summaries)) == 940
    assert set(in_summaries).isdisjoint(t.id for t in live)
    assert set(in_summaries) | {t.id for t in live} == set(ids)
    assert [s.metadata["turn_range"] for s in summaries] == [[k + 1, k + 20] for k in range(0, 940, 20)]
    s0 = summaries[0]
    assert (s0.kind, s0.source, s0.thread_id, s0.agent_id) == ("summary", "l1-summary", "long", "a")
    assert s0.metadata["turn_ids"] == ids[:20]
    assert "Question 0" in s0.content and s0.content.startswith("Conversation summary, turns 1-20:")

    # Flushing folds the partial batch too: afterwards L1 holds exactly the window.
    assert await store.summarize_session("long", agent_id="a") == 10
    live = await store.get_recent_turns("long", agent_id="a")
    assert [t.id for t in live] == ids[-50:]
    assert len(await summaries_of(store, "long", "a")) == 48


async def test_summarizer_recovers_after_failures(make_store: Any) -> None:
    """A summariser that fails then recovers: turns waited in L1, nothing was dropped, all get summarised."""

    class Flaky:
        def __init__(self) -> None:
            self.fail = True

        async def summarize(self, turns: Any) -> str:
            if self.fail:
                raise ConnectionError("LLM unavailable")
            return f"{len(turns)} turns about testing"

    flaky = Flaky()
    store = make_store(max_session_turns=4, summarize_batch=3, summarizer=flaky)
    ids = [await store.store_turn("t", f"q{i}", f"a{i}") for i in range(10)]
    await asyncio.sleep(0.1)
    meta = await store.get_session_metadata("t")
    assert meta.summary_failures >= 1 and meta.summarized_through == 0 and meta.retained_turns == 10
    flaky.fail = False
    assert await store.summarize_session("t") == 6
    live = await store.get_recent_turns("t")
    summaries = await summaries_of(store, "t")
    assert {i for s in summaries for i in s.metadata["turn_ids"]} | {t.id for t in live} == set(ids)
    assert [t.id for t in live] == ids[-4:]
    assert "6 turns" not in summaries[0].content and "3 turns about testing" in summaries[0].content


async def test_slow_summarizer_holds_writers_back_instead_of_dropping(make_store: Any) -> None:
    """A healthy summariser slower than the writer: store_turn waits near the cap, no turn is dropped."""

    class Slow:
        async def summarize(self, turns: Any) -> str:
            await asyncio.sleep(0.03)
            return f"{len(turns)} turns"

    # cap = 5 + 6 = 11 turns held; without backpressure 60 quick turns overrun it many times.
    store = make_store(max_session_turns=5, summarize_batch=2, max_unsummarized=6, summarizer=Slow())
    ids = [await store.store_turn("t", f"q{i}", f"a{i}") for i in range(60)]
    meta = await store.get_session_metadata("t")
    assert meta.dropped_turns == 0 and meta.summary_failures == 0
    assert meta.retained_turns <= 11
    await store.summarize_session("t")
    live = await store.get_recent_turns("t")
    summarised = [i for s in await summaries_of(store, "t") for i in s.metadata["turn_ids"]]
    assert len(summarised) == len(set(summarised)) == 55
    assert set(summarised) | {t.id for t in live} == set(ids)


async def test_stuck_summarizer_holds_writers_back_for_one_lock_ttl_only(make_store: Any) -> None:
    """A summariser that never returns: one writer waits summary_lock_ttl, then the hard cap counts drops."""
    gate = asyncio.Event()

    class Stuck:
        async def summarize(self, turns: Any) -> str:
            await gate.wait()
            return "late"

    store = make_store(
        max_session_turns=2,
        summarize_batch=1,
        max_unsummarized=2,
        summarizer=Stuck(),
        summary_lock_ttl=0.3,
        shutdown_grace=0,
    )
    started = time.monotonic()
    for i in range(10):
        await store.store_turn("t", f"q{i}", f"a{i}")
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 2.0  # one wait of a lock TTL, not one per turn
    meta = await store.get_session_metadata("t")
    assert meta.turn_count == 10 and meta.retained_turns == 4 and meta.dropped_turns > 0
    gate.set()


async def test_cleared_session_is_not_resurrected_by_a_summary(make_store: Any) -> None:
    """A summary finishing after clear_session does not recreate the session's L1 keys."""
    gate = asyncio.Event()

    class Gated:
        async def summarize(self, turns: Any) -> str:
            await gate.wait()
            return "late summary"

    store = make_store(max_session_turns=2, summarize_batch=2, summarizer=Gated())
    for i in range(4):
        await store.store_turn("t", f"q{i}", f"a{i}")
    await asyncio.sleep(0.05)
    await store.clear_session("t")
    gate.set()
    await store.summarize_session("t")  # waits for the running job
    assert await store.get_session_metadata("t") is None
    assert await store.get_recent_turns("t") == []


async def test_openai_summarizer_over_http(make_store: Any) -> None:
    """OpenAISummarizer talks chat completions to a real local HTTP server; its text becomes the summary."""
    pytest.importorskip("openai")
    from betterdb_memory.summarizers import OpenAISummarizer

    def reply(body: dict[str, Any]) -> str:
        user = body["messages"][-1]["content"]
        return f"The user asked {user.count('User:')} questions about cheese."

    with ChatServer(reply) as server:
        summarizer = OpenAISummarizer("test-model", api_key="k", base_url=server.base_url, max_retries=0)
        store = make_store(max_session_turns=2, summarize_batch=3, summarizer=summarizer)
        for i in range(5):
            await store.store_turn("t", f"Which cheese number {i}?", f"Cheese {i} is Comté.")
        await store.summarize_session("t")
        await summarizer.aclose()
    summaries = await summaries_of(store, "t")
    assert [s.content for s in summaries] == [
        "Conversation summary, turns 1-3:\nThe user asked 3 questions about cheese."
    ]
    assert summaries[0].metadata["summarizer"] == "OpenAISummarizer"
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["body"]["model"] == "test-model"
    assert request["body"]["messages"][0]["role"] == "system"
    assert "Which cheese number 0?" in request["body"]["messages"][1]["content"]


async def test_openai_summarizer_http_error_is_counted(make_store: Any) -> None:
    """An endpoint that does not exist: the failure is counted on the session, turns stay."""
    pytest.importorskip("openai")
    from betterdb_memory.summarizers import OpenAISummarizer

    summarizer = OpenAISummarizer(
        "m", api_key="k", base_url="http://127.0.0.1:1/v1", max_retries=0, timeout=2
    )
    store = make_store(max_session_turns=1, summarize_batch=1, summarizer=summarizer)
    await store.store_turn("t", "q1", "a1")
    await store.store_turn("t", "q2", "a2")
    with pytest.raises(Exception) as info:
        await store.summarize_session("t")
    assert getattr(info.value, "code", None) == "server.llm_unreachable"
    meta = await store.get_session_metadata("t")
    assert meta.summary_failures >= 1 and meta.retained_turns == 2
    await summarizer.aclose()
