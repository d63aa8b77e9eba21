"""tiers.hybrid: the text side of a hybrid recall beside the KNN, within its budget, degrading to the KNN alone."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY

from betterdb_memory.core.dialect import capabilities_for
from betterdb_memory.core.frequencies import word_count_args
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.models import MemoryHit, MemoryItem
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.core.scoring import ScoreParts, Weights
from betterdb_memory.errors import QuerySyntaxError, ServerError
from betterdb_memory.testing import RecordingBackend
from betterdb_memory.tiers.documents import Documents
from betterdb_memory.tiers.hybrid import TextCandidates, TextRequest, reply_total
from tests.unit.parts import runtime, search_reply

QUERY = "where is priya moving"


def degraded(reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "agent_memory_recall_degraded_total", {"store_name": "parts", "reason": reason}
    )
    return value or 0.0


def text_side(**settings: Any) -> tuple[TextCandidates, RecordingBackend, TextRequest]:
    backend = RecordingBackend()
    rt = runtime(backend, **settings)
    side = TextCandidates(rt, Documents(rt))
    request = side.request(QUERY, MemoryFilter(), ("content",), pool=50)
    assert request is not None and request.queries == 1  # RediSearch: one query for all the words
    return side, backend, request


async def knn() -> str:
    return "knn"


def test_the_text_query_carries_the_stores_budget() -> None:
    _, _, request = text_side(text_timeout_ms=250)
    [text] = request.searches[: request.queries]
    assert text[text.index("TIMEOUT") + 1] == "250"
    _, _, default = text_side()
    assert default.searches[0][default.searches[0].index("TIMEOUT") + 1] == "500"


async def test_a_warning_that_is_not_a_timeout_does_not_degrade() -> None:
    side, backend, request = text_side()
    other = {b"warning": [b"Max prefix expansions limit was reached"], b"total_results": 0, b"results": []}
    backend.reply(other, *[0] * (len(request.searches) - 1))
    assert await side.alongside(request, knn()) == ("knn", [other], None)


async def test_complete_replies_pass_through_undegraded() -> None:
    side, backend, request = text_side()
    hit = search_reply(1, ("parts:mem:m1", {"content": "priya moves to porto"}))
    backend.reply(hit, *[0] * (len(request.searches) - 1))
    before = {r: degraded(r) for r in ("timeout", "error", "partial")}
    result, replies, reason = await side.alongside(request, knn())
    assert (result, replies, reason) == ("knn", [hit], None)
    assert {r: degraded(r) for r in before} == before


async def test_a_redisearch_partial_answer_is_used_and_counted_as_degraded() -> None:
    """ON_TIMEOUT RETURN under RESP3: the hits found so far come back with a warning; fail-soft."""
    side, backend, request = text_side()
    partial = {
        b"warning": [b"Timeout limit was reached"],
        b"total_results": 1,
        b"results": [{b"id": b"parts:mem:m1", b"extra_attributes": {b"content": b"priya"}}],
    }
    backend.reply(partial, *[0] * (len(request.searches) - 1))
    before = degraded("partial")
    result, replies, reason = await side.alongside(request, knn())
    assert (result, replies, reason) == ("knn", [partial], "partial")
    assert degraded("partial") == before + 1


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ServerError("recall: Search operation cancelled due to timeout"), "timeout"),  # valkey-search
        (ServerError("recall: Timeout limit was reached"), "timeout"),  # RediSearch, ON_TIMEOUT FAIL
        (QuerySyntaxError("recall: Syntax error at offset 3"), "error"),
    ],
)
async def test_a_failed_text_side_leaves_the_knn_alone(error: Exception, reason: str) -> None:
    side, backend, request = text_side()
    backend.reply(error, *[0] * (len(request.searches) - 1))
    before = degraded(reason)
    result, replies, got = await side.alongside(request, knn())
    assert (result, replies, got) == ("knn", [], reason)
    assert degraded(reason) == before + 1


async def test_a_text_side_that_never_answers_is_cut_at_the_client_bound() -> None:
    side, backend, request = text_side(text_timeout_ms=1)  # bound: 0.101 s
    never = asyncio.Event()

    async def stuck(*args: Any, **kwargs: Any) -> list[Any]:
        await never.wait()
        return []

    backend.pipeline = stuck  # type: ignore[method-assign]
    before = degraded("timeout")
    assert await side.alongside(request, knn()) == ("knn", [], "timeout")
    assert degraded("timeout") == before + 1


async def test_a_knn_failure_raises_and_cancels_the_text_side() -> None:
    side, backend, request = text_side()
    started, never = asyncio.Event(), asyncio.Event()

    async def stuck(*args: Any, **kwargs: Any) -> list[Any]:
        started.set()
        await never.wait()
        return []

    backend.pipeline = stuck  # type: ignore[method-assign]

    async def broken() -> str:
        await started.wait()
        raise ServerError("recall: Search operation cancelled due to timeout")

    before = {r: degraded(r) for r in ("timeout", "error", "partial")}
    others = asyncio.all_tasks()  # tasks other tests left on this loop are not the text side
    with pytest.raises(ServerError):
        await side.alongside(request, broken())
    for _ in range(5):  # a cancelled wait_for takes a few turns of the loop to finish
        await asyncio.sleep(0)
    assert not asyncio.all_tasks() - others  # the text side is gone
    assert {r: degraded(r) for r in before} == before


async def test_no_request_is_the_knn_alone() -> None:
    side, _, _ = text_side()
    assert await side.alongside(None, knn()) == ("knn", [], None)


def test_mark_sets_explain_degraded_only_where_explain_is() -> None:
    item = MemoryItem(id="m1", content="x", importance=0.5, created_at=0, last_accessed_at=0, access_count=0)
    parts = ScoreParts(similarity=1.0, recency=1.0, importance=0.5, weights=Weights(1, 0, 0), score=1.0)
    explained = MemoryHit(item=item, score=1.0, similarity=1.0, distance=0.0, explain=parts)
    bare = MemoryHit(item=item, score=1.0, similarity=1.0, distance=0.0)
    marked = TextCandidates.mark([explained, bare], "timeout")
    assert marked[0].explain is not None and marked[0].explain.degraded == "timeout"
    assert marked[1].explain is None
    assert TextCandidates.mark([explained], None) == [explained]


LONG_QUESTION = "what did caroline and melanie paint at the lake during their summer camping trip"


def test_a_per_word_engine_sends_at_most_max_words_text_queries() -> None:
    backend = RecordingBackend(capabilities=capabilities_for("valkey-search", (1, 2, 1)))
    rt = runtime(backend)
    side = TextCandidates(rt, Documents(rt))
    side.max_words = 3
    request = side.request(LONG_QUESTION, MemoryFilter(), ("content",), pool=50)
    assert request is not None and request.queries == 3  # one query per word, three words
    # Every word is still counted, so the next recall picks the rarest three by their counts.
    assert len(request.plan.probe_words) == 7 and request.plan.probe_total
    side.max_words = None
    uncapped = side.request(LONG_QUESTION, MemoryFilter(), ("content",), pool=50)
    assert uncapped is not None and uncapped.queries == 7


def test_redisearch_sends_one_query_for_every_word_whatever_the_cap() -> None:
    rt = runtime(RecordingBackend())
    side = TextCandidates(rt, Documents(rt))
    side.max_words = 3
    request = side.request(LONG_QUESTION, MemoryFilter(), ("content",), pool=50)
    assert request is not None and request.queries == 1 and len(request.plan.words) == 7


def test_reply_total_reads_either_protocol() -> None:
    assert reply_total(search_reply(7, ("parts:mem:m1", {"content": "x"}))) == 7
    assert reply_total({b"total_results": 3, b"results": []}) == 3
    assert reply_total({"total_results": 2}) == 2
    assert reply_total([]) is None and reply_total(0) is None and reply_total(None) is None
    assert reply_total([b"junk"]) is None


def valkey_search_side() -> tuple[TextCandidates, RecordingBackend, Any]:
    backend = RecordingBackend(capabilities=capabilities_for("valkey-search", (1, 2, 1)))
    rt = runtime(backend)
    side = TextCandidates(rt, Documents(rt))
    side.max_words = 3
    return side, backend, rt


async def test_word_counts_leave_the_recalls_round_trip_and_a_searched_word_counts_itself() -> None:
    """A count costs valkey-search what a search of the word costs: none rides in the recall.
    The unscoped word queries' totals are their words' counts; the other words are counted
    after the recall, in the background, and the next recall chooses by all seven counts."""
    side, backend, rt = valkey_search_side()
    request = side.request(LONG_QUESTION, MemoryFilter(), ("content",), pool=50)
    assert request is not None and request.queries == 3
    [*_, first_count] = request.searches
    assert len(request.searches) == 4 and first_count[2] == "@created_at:[-inf +inf]"  # the index's
    assert request.counted == request.plan.words
    searched = set(request.plan.words)
    others = [w for w in request.plan.probe_words if w not in searched]
    assert len(others) == 4
    backend.reply(search_reply(900), search_reply(700), search_reply(800), search_reply(5000))
    backend.reply(*(search_reply(n) for n in (2, 3, 4, 1000)))  # the background counts
    _, replies, reason = await side.alongside(request, knn())
    assert reason is None and len(replies) == 3
    await rt.supervisor.close()
    counting = backend.sent[-1]
    assert counting.operation == "recall" and not counting.commands
    assert [list(s) for s in counting.searches] == [word_count_args(rt.index.name, w) for w in others]
    again = side.request(LONG_QUESTION, MemoryFilter(), ("content",), pool=50)
    assert again is not None and again.plan.probe_words == () and not again.plan.probe_total
    assert set(again.plan.words) == set(others[:3])  # counted 2, 3, 4: the rarest now


async def test_a_scoped_word_query_does_not_count_its_word() -> None:
    side, backend, rt = valkey_search_side()
    scoped = MemoryFilter(scope=Scope.of(thread_id="t1"))
    request = side.request(LONG_QUESTION, scoped, ("content",), pool=50)
    assert request is not None and request.queries == 3 and request.counted == ()
    backend.reply(*(search_reply(1) for _ in request.searches))
    await side.alongside(request, knn())
    await rt.supervisor.close()
    assert len(backend.sent[-1].searches) == 7  # every word counted in the background


async def test_a_failed_count_leaves_the_words_to_a_later_recall() -> None:
    side, backend, rt = valkey_search_side()
    request = side.request("porto kayak", MemoryFilter(scope=Scope.of(thread_id="t1")), ("content",), pool=50)
    assert request is not None
    backend.reply(*(search_reply(5000) for _ in request.searches))  # the last: the index's count
    backend.reply(ServerError("recall: LOADING"), search_reply(1))
    await side.alongside(request, knn())
    await rt.supervisor.close()  # the failure stays in the background task
    again = side.request("porto kayak", MemoryFilter(), ("content",), pool=50)
    assert again is not None and again.plan.probe_words == ("kayak", "porto")


def test_redisearch_learns_a_word_from_a_one_word_query_only() -> None:
    rt = runtime(RecordingBackend())
    side = TextCandidates(rt, Documents(rt))
    one = side.request("porto", MemoryFilter(), ("content",), pool=50)
    assert one is not None and one.counted == ("porto",)
    many = side.request("porto kayak", MemoryFilter(), ("content",), pool=50)
    assert many is not None and many.queries == 1 and many.counted == ()


def test_a_per_word_union_keeps_its_lexically_best_and_builds_only_those() -> None:
    """valkey-search's word queries return up to 50 hits each: the union is cut to
    ``text_candidates`` by the hits' text before items and distances are made."""
    rt = runtime(
        RecordingBackend(capabilities=capabilities_for("valkey-search", (1, 2, 1))), text_candidates=2
    )
    side = TextCandidates(rt, Documents(rt))
    vector = np.ones(8, dtype=np.float32)
    blob = np.ones(8, dtype=np.float32).tobytes()

    def hit(mid: str, content: str) -> tuple[str, dict[str, Any]]:
        return (f"parts:mem:{mid}", {"content": content, "importance": "0.5", "created_at": "1"})

    porto = search_reply(
        3, hit("a", "porto"), hit("b", "priya moving to porto"), hit("k", "known to the knn: porto")
    )
    moving = search_reply(2, hit("c", "moving boxes"), hit("b", "priya moving to porto"))
    # Vectors travel as raw bytes: add one to "b" only (the others are placed at ``farthest``).
    porto[4] += [b"vector", blob]
    pairs = side.candidates(
        [porto, moving],
        query="is priya moving to porto",
        vector=vector,
        flt=MemoryFilter(),
        known={"k"},
        reranker=None,
        farthest=0.9,
        slim=True,
    )
    assert [item.id for item, _ in pairs] == ["b", "a"]  # "b" holds three of the words; "a" and "c" one
    assert pairs[0][1] == pytest.approx(0.0, abs=1e-6) and pairs[1][1] == 0.9
    assert pairs[0][0].content == "priya moving to porto"


def test_redisearch_scores_the_words_under_its_own_budget() -> None:
    rt = runtime(RecordingBackend())
    side = TextCandidates(rt, Documents(rt))
    side._frequencies.learn({"porto": 3, "kayak": 600, "trip": 450}, 100_000, 0.0)
    side.scored_budget = 500
    request = side.request("porto kayak trip", MemoryFilter(), ("content",), pool=50)
    assert request is not None and request.plan.words == ("porto", "trip")
    side.scored_budget = 5000
    request = side.request("porto kayak trip", MemoryFilter(), ("content",), pool=50)
    assert request is not None and request.plan.words == ("kayak", "porto", "trip")


def test_redisearch_sends_no_text_query_for_a_scope_its_knn_read_whole() -> None:
    """A filtered KNN that comes back short found every memory of the filter: the next
    recall's KNN reads them all again, so its text query could add none and is not sent,
    until a KNN under that filter comes back full."""
    rt = runtime(RecordingBackend())
    side = TextCandidates(rt, Documents(rt))
    thread = MemoryFilter(scope=Scope.of(thread_id="t1"))
    other = MemoryFilter(scope=Scope.of(thread_id="t2"))
    assert side.request(QUERY, thread, ("content",), pool=50) is not None
    side.knn_read(thread, 7, 50)
    assert side.request(QUERY, thread, ("content",), pool=50) is None
    assert side.request(QUERY, thread, ("content",), pool=7) is None  # a KNN of 7 still reads all 7
    asked = side.request(QUERY, thread, ("content",), pool=6)  # a smaller KNN does not
    assert asked is not None and asked.queries == 1
    assert side.request(QUERY, other, ("content",), pool=50) is not None  # another scope
    side.knn_read(thread, 50, 50)  # full: the scope may hold more
    again = side.request(QUERY, thread, ("content",), pool=50)
    assert again is not None and again.queries == 1


def test_a_scope_read_whole_is_remembered_only_where_the_count_is_exact() -> None:
    """Unscoped (the index's count decides), ``where=`` and time filters (checked or windowed
    in the client), and valkey-search (its filtered KNN may stop short of k) keep the text query."""
    rt = runtime(RecordingBackend())
    side = TextCandidates(rt, Documents(rt))
    for flt in (
        MemoryFilter(),
        MemoryFilter(scope=Scope.of(thread_id="t1"), valid_since=1),
    ):
        side.knn_read(flt, 3, 50)
        assert side.request(QUERY, flt, ("content",), pool=50) is not None
    vs = RecordingBackend(capabilities=capabilities_for("valkey-search", (1, 2, 1)))
    vs_rt = runtime(vs)
    vs_side = TextCandidates(vs_rt, Documents(vs_rt))
    thread = MemoryFilter(scope=Scope.of(thread_id="t1"))
    vs_side.knn_read(thread, 3, 50)
    request = vs_side.request(QUERY, thread, ("content",), pool=50)
    assert request is not None and request.queries >= 1
