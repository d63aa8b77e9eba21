"""retrieve_context and extract_memories on the real engine."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .test_l1_support import ChatServer

pytestmark = pytest.mark.integration


async def test_rich_context_uses_at_least_90_percent_and_never_more(make_store: Any) -> None:
    """More material than room: >= 90% of the usable budget is used, never more; the reserve is left alone."""
    store = make_store(max_session_turns=100, summarize_batch=0, default_threshold=2.0)
    for i in range(60):
        await store.store_turn(
            "t",
            f"Tell me about Lisbon trip step {i}.",
            f"Step {i} of the Lisbon trip is planned.",
            agent_id="a",
        )
    await store.remember_many(
        [
            {"content": f"The user wants Lisbon trip detail {i} handled carefully.", "agent_id": "a"}
            for i in range(60)
        ]
    )
    for budget in (600, 1200, 2000):
        ctx = await store.retrieve_context("t", "Lisbon trip planning", token_budget=budget, agent_id="a")
        assert ctx.system_reserve == int(budget * 0.3) and ctx.usable_budget == budget - ctx.system_reserve
        assert 0.9 * ctx.usable_budget <= ctx.tokens_used.total <= ctx.usable_budget, budget
        assert ctx.tokens_used.memories > 0 and ctx.tokens_used.turns > 0 and ctx.tokens_used.current_turn > 0
        assert [t.seq for t in ctx.turns] == sorted(t.seq for t in ctx.turns)
        assert ctx.turns[-1].seq == 60  # the newest turn is always in
        assert [h.score for h in ctx.memories] == sorted((h.score for h in ctx.memories), reverse=True)
        assert ctx.retrieval_ms > 0 and ctx.usable_utilisation >= 0.9
        # actrone-memory's accounting: what is returned, over the whole budget.
        assert ctx.total_tokens_used == ctx.tokens_used.memories + ctx.tokens_used.turns
        assert ctx.budget_utilisation == ctx.total_tokens_used / budget
        assert "Recent conversation:" in ctx.render()
    roomy = await store.retrieve_context("t", "Lisbon trip planning", token_budget=20_000, agent_id="a")
    assert len(roomy.turns) == 60 and roomy.skipped_turns == roomy.skipped_memories == 0


async def test_oversize_turn_does_not_hide_older_turns(make_store: Any) -> None:
    """A ~2,000-token turn is skipped; the turns before and after it are all included."""
    store = make_store()
    ids = [await store.store_turn("t", f"short question {i}", f"short answer {i}") for i in range(5)]
    await store.store_turn("t", "paste: " + "lorem ipsum dolor " * 450, "That is a long paste.")
    ids += [await store.store_turn("t", f"later question {i}", f"later answer {i}") for i in range(5)]
    ctx = await store.retrieve_context("t", "what did I ask?", token_budget=1500)
    assert [t.id for t in ctx.turns] == ids
    assert ctx.skipped_turns == 1
    assert ctx.tokens_used.total <= ctx.usable_budget


async def test_redaction_excludes_sensitivity_classes(make_store: Any) -> None:
    """redact= leaves out memories of those classes; the store's default applies when not given."""
    store = make_store(redact=["pii"], default_threshold=2.0)
    await store.remember_many(
        [
            {"content": "User's favourite colour is blue", "agent_id": "a", "sensitivity": "none"},
            {"content": "User's email colour blue is ada@example.com", "agent_id": "a", "sensitivity": "pii"},
            {"content": "User's blue colour medical note", "agent_id": "a", "sensitivity": "sensitive"},
        ]
    )
    await store.store_turn("t", "hello", "hi", agent_id="a")

    async def sensitivities(**kw: Any) -> set[str]:
        ctx = await store.retrieve_context(
            "t", "favourite colour blue", token_budget=4000, agent_id="a", **kw
        )
        return {h.item.sensitivity for h in ctx.memories}

    assert await sensitivities() == {"none", "sensitive"}
    assert await sensitivities(redact=["pii", "sensitive"]) == {"none"}
    assert await sensitivities(redact=[]) == {"none", "pii", "sensitive"}


async def test_context_of_empty_session(make_store: Any) -> None:
    """No turns and no memories: an empty context, not an error."""
    store = make_store()
    ctx = await store.retrieve_context("nobody", "anything", token_budget=100)
    assert ctx.turns == () and ctx.memories == () and ctx.tokens_used.total == ctx.tokens_used.current_turn
    assert ctx.total_tokens_used == 0 and ctx.budget_utilisation == 0.0
    assert ctx.recent_turns == [] and ctx.episodic_memories == []


async def test_extract_memories_with_openai_extractor_over_http(make_store: Any) -> None:
    """Structured output is requested; a fenced, oddly-cased reply is parsed; facts are stored with provenance."""
    pytest.importorskip("openai")
    from betterdb_memory.extraction import FACTS_SCHEMA, OpenAIFactExtractor

    facts = {
        "Facts": [
            {
                "Content": "The user is allergic to peanuts.",
                "Sensitivity": "Sensitive",
                "topicTags": ["health"],
                "Importance": 0.9,
            },
            {
                "content": "The user's name is Ada.",
                "SENSITIVITY": "PII",
                "topic_tags": ["identity"],
                "importance": 0.7,
            },
        ]
    }
    reply = "```json\n" + json.dumps(facts) + "\n```"
    with ChatServer(lambda body: reply) as server:
        extractor = OpenAIFactExtractor("fact-model", api_key="k", base_url=server.base_url, max_retries=0)
        store = make_store(fact_extractor=extractor)
        turn_ids = [
            await store.store_turn("t", "Hi, I'm Ada.", "Hello Ada!", agent_id="a"),
            await store.store_turn("t", "I can't eat peanuts.", "Noted, no peanuts.", agent_id="a"),
        ]
        ids = await store.extract_memories("t", agent_id="a")
        await extractor.aclose()
    items = await store.get_many(ids)
    assert [(i.content, i.sensitivity, i.tags) for i in items] == [
        ("The user is allergic to peanuts.", "sensitive", ["health"]),
        ("The user's name is Ada.", "pii", ["identity"]),
    ]
    for item in items:
        assert (item.kind, item.source, item.thread_id, item.agent_id) == ("extracted", "extracted", "t", "a")
        assert item.metadata["source_turn_ids"] == turn_ids
    body = server.requests[0]["body"]
    assert body["model"] == "fact-model"
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["strict"] is True
    assert body["response_format"]["json_schema"]["schema"] == FACTS_SCHEMA
    assert "I can't eat peanuts." in body["messages"][-1]["content"]


async def test_extractor_output_failing_validation_is_skipped(make_store: Any, caplog: Any) -> None:
    """A custom extractor's invalid fact (unknown sensitivity) is skipped with a warning; valid ones are stored."""
    from betterdb_memory.extraction import ExtractedFact

    class Custom:
        async def extract(self, turns: Any) -> list[ExtractedFact]:
            return [ExtractedFact("Valid fact about turns", "low"), ExtractedFact("Bad class", "top-secret")]

    store = make_store(fact_extractor=Custom())
    await store.store_turn("t", "q", "a")
    with caplog.at_level("WARNING", logger="betterdb_memory.tiers.sessions"):
        ids = await store.extract_memories("t", n=5)
    assert [i.content for i in await store.get_many(ids)] == ["Valid fact about turns"]
    assert "top-secret" in caplog.text
