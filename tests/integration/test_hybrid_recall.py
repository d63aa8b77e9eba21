"""Hybrid recall on the real engine: full-text candidates the KNN misses, and the relevance gate.

The engine's full-text index joins the KNN candidates where it has TEXT fields
(RediSearch; valkey-search >= 1.2, one query per word); valkey-search 1.0 keeps the
KNN-only path (``TextCandidates.available``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.core.frequencies import PER_WORD_MAX_WORDS
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.core.ranking import query_words

pytestmark = pytest.mark.integration

DIM = 64


def unit(seed: int) -> list[float]:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    out: list[float] = (v / np.linalg.norm(v)).tolist()
    return out


@pytest.fixture
async def store(client: Any, unique_name: str) -> Any:
    s = MemoryStore(
        client=client,
        name=unique_name,
        embedder=HashingEmbedder(DIM),
        discovery=False,
        rerank_candidates=2,  # a KNN of two: what it misses, only the words can bring
    )
    yield s
    await s.forget_by_scope(thread_id="h")
    await s.close()


async def test_text_candidates_bring_what_the_knn_misses(store: Any) -> None:
    query = "Which city is Zanzibarite Priya moving to?"
    [qv] = (await store.embedder.embed([query])).tolist()
    # Two distractors sit near the query's vector (the KNN's two); the answer is far from it.
    for seed, text in ((3, "The weather was mild all week."), (4, "We talked about nothing much.")):
        close = np.asarray(qv) + 1.5 * np.asarray(unit(seed))
        await store.remember(text, vector=(close / np.linalg.norm(close)).tolist(), thread_id="h")
    answer = await store.remember(
        "Zanzibarite Priya is moving to Porto in May.", vector=unit(1), thread_id="h"
    )
    await store.remember("Zanzibarite elsewhere, another thread.", vector=unit(2), thread_id="other")
    await store.index.ensure_ready()
    hits = await store.recall(query, k=3, threshold=2.0, thread_id="h", reinforce=False, explain=True)
    ids = [h.item.id for h in hits]
    if not store._recall._text.available():  # valkey-search 1.0: KNN only
        assert answer not in ids
        return
    assert ids[0] == answer  # found by its words, then first on them
    top = hits[0]
    assert top.distance == pytest.approx(1 - float(np.dot(qv, unit(1))), abs=1e-5)  # its real distance
    assert top.explain is not None and top.explain.similarity > top.similarity  # lifted by the words
    assert all(h.item.thread_id == "h" for h in hits)  # the scope holds in the text query too
    dense = MemoryStore(
        client=store.client, name=store.name, embedder=store.embedder, discovery=False, reranker=False
    )
    try:
        plain = await dense.recall(query, k=3, threshold=2.0, thread_id="h", reinforce=False)
        assert answer not in [h.item.id for h in plain][:2]  # the dense order alone misses it
    finally:
        await dense.close()


async def test_the_gate_answers_or_stays_silent_for_the_whole_recall(store: Any) -> None:
    base = np.asarray(unit(10))
    near = base + 0.3 * np.asarray(unit(11))
    near = (near / np.linalg.norm(near)).tolist()
    await store.remember("alpha note", vector=near, thread_id="h")
    for i in range(6):
        await store.remember(f"beta note {i}", vector=unit(20 + i), thread_id="h")
    nearest = 1 - float(np.dot(base, np.asarray(near)))
    common: dict[str, Any] = {"thread_id": "h", "reinforce": False, "k": 3}
    # A ceiling below the nearest and a margin it clears by far: the gate opens, and then no
    # candidate is cut by its own distance (all three come back).
    store._rt.settings = type(store._rt.settings)(
        **{**_fields(store._rt.settings), "margin": 0.3, "rerank_candidates": 10}
    )
    hits = await store.recall_by_vector(base.tolist(), query="note", threshold=nearest / 2, **common)
    assert len(hits) == 3 and hits[0].item.content == "alpha note"
    # No margin: the ceiling alone, below the nearest, keeps the recall silent.
    store._rt.settings = type(store._rt.settings)(**{**_fields(store._rt.settings), "margin": None})
    assert await store.recall_by_vector(base.tolist(), query="note", threshold=nearest / 2, **common) == []
    within = nearest + 1e-3  # the engine's float32 distance may round above the float64 one
    assert len(await store.recall_by_vector(base.tolist(), query="note", threshold=within, **common)) == 3


def _fields(settings: Any) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__slots__}


async def test_text_candidates_zero_keeps_the_knn_alone(client: Any, unique_name: str) -> None:
    from betterdb_memory import ValidationError

    with pytest.raises(ValidationError):
        MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder(DIM), text_candidates=-1)
    store = MemoryStore(
        client=client,
        name=unique_name,
        embedder=HashingEmbedder(DIM),
        discovery=False,
        rerank_candidates=1,
        text_candidates=0,
    )
    try:
        query = "Where is Zanzibarite Priya moving?"
        [qv] = (await store.embedder.embed([query])).tolist()
        await store.remember("The weather was mild.", vector=qv, thread_id="k")
        answer = await store.remember("Zanzibarite Priya moves to Porto.", vector=unit(5), thread_id="k")
        await store.index.ensure_ready()
        flt = MemoryFilter(scope=Scope(thread_id="k"))
        assert store._recall._text.request(query, flt, ["content"], pool=1) is None
        hits = await store.recall(query, k=1, threshold=2.0, thread_id="k", reinforce=False)
        assert answer not in [h.item.id for h in hits]  # the KNN of one holds only the nearest
    finally:
        await store.forget_by_scope(thread_id="k")
        await store.close()


async def _common_word_store(client: Any, name: str) -> tuple[MemoryStore, str]:
    """A store whose thread "c" holds 9 memories with "user" in each, one with the rare word
    "Zanzibarite" (its id returned), the KNN's pool 2: only the text side can bring it."""
    store = MemoryStore(
        client=client, name=name, embedder=HashingEmbedder(DIM), discovery=False, rerank_candidates=2
    )
    for i in range(8):
        await store.remember(f"The user noted item {i}.", vector=unit(100 + i), thread_id="c")
    answer = await store.remember("The user is moving to Zanzibarite Porto.", vector=unit(99), thread_id="c")
    await store.index.ensure_ready()
    return store, answer


async def test_words_most_memories_hold_leave_the_text_query(client: Any, unique_name: str) -> None:
    """Once counted, a word in most memories is not searched for; the rare words still find their memory."""
    store, answer = await _common_word_store(client, unique_name)
    try:
        query = "What does the user say about Zanzibarite?"
        flt = MemoryFilter(scope=Scope(thread_id="c"))
        first = store._recall._text.request(query, flt, ["content"], pool=2)
        if first is None:  # valkey-search 1.0: no TEXT, KNN only
            return
        assert first.plan.words == ("say", "user", "zanzibarite") and first.plan.probe_total
        hits = await store.recall(query, k=1, threshold=2.0, thread_id="c", reinforce=False)
        assert [h.item.id for h in hits] == [answer]  # the KNN of two misses it; its rare word brings it
        await store._recall._text.settled()  # the words are counted after the recall, off its path
        again = store._recall._text.request(query, flt, ["content"], pool=2)
        assert again is not None and again.plan.words == ("say", "zanzibarite")  # "user": 9 of 9 memories
        assert not again.plan.probe_words and not again.plan.probe_total
        assert all("user" not in " ".join(args) for args in again.searches)
        hits = await store.recall(query, k=1, threshold=2.0, thread_id="c", reinforce=False)
        assert [h.item.id for h in hits] == [answer]
        # Counts past their ttl still decide while they are taken again: "user" stays out.
        store._recall._text._frequencies.ttl = 0.0
        stale = store._recall._text.request(query, flt, ["content"], pool=2)
        assert stale is not None and stale.plan.words == ("say", "zanzibarite")
        assert stale.plan.probe_words == ("say", "user", "zanzibarite") and stale.plan.refresh_total
        assert all("user" not in " ".join(args) for args in stale.searches)
        hits = await store.recall(query, k=1, threshold=2.0, thread_id="c", reinforce=False)
        assert [h.item.id for h in hits] == [answer]
        await store._recall._text.settled()
        # An index no larger than the KNN's pool: no text query at all (the KNN reads it whole).
        small = store._recall._text.request(query, flt, ["content"], pool=50)
        assert small is not None and small.queries == 0 and small.plan.probe_total
    finally:
        await store.forget_by_scope(thread_id="c")
        await store.close()


async def test_a_recount_the_pace_refuses_leaves_the_stale_count_deciding(
    client: Any, unique_name: str
) -> None:
    """Recounts walk their words' postings on the engine's thread, so they go at a pace; one it
    refuses is not sent, the stale count keeps deciding, and the recall still finds its memory."""
    store, answer = await _common_word_store(client, unique_name)
    try:
        query = "What does the user say about Zanzibarite?"
        text = store._recall._text
        if not text.available():  # valkey-search 1.0: no TEXT, KNN only
            return
        await store.recall(query, k=1, threshold=2.0, thread_id="c", reinforce=False)
        await text.settled()
        freq = text._frequencies
        learned = {w: freq._words[w] for w in ("user", "zanzibarite")}
        freq.ttl = 0.0  # every count stale
        text._refresher._pace._tokens = -1e9  # and the pace allows no recount
        hits = await store.recall(query, k=1, threshold=2.0, thread_id="c", reinforce=False)
        await text.settled()
        assert [h.item.id for h in hits] == [answer]
        assert {w: freq._words[w] for w in learned} == learned  # not retaken
        stale = text.request(query, MemoryFilter(scope=Scope(thread_id="c")), ["content"], pool=2)
        assert stale is not None and "user" not in stale.plan.words  # the stale count still keeps it out
        text._refresher._pace._tokens = 1e9  # the pace allows again: the next recall's counts are retaken
        await store.recall(query, k=1, threshold=2.0, thread_id="c", reinforce=False)
        await text.settled()
        assert all(freq._words[w][1] > learned[w][1] for w in learned)
    finally:
        await store.forget_by_scope(thread_id="c")
        await store.close()


async def test_the_text_query_keeps_its_words_under_the_postings_budget(
    client: Any, unique_name: str
) -> None:
    """A word under the common share but over the budget is not searched for once counted;
    the rarer word still brings the memory the KNN misses."""
    store = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(DIM), discovery=False, rerank_candidates=2
    )
    try:
        store._recall._text._frequencies.postings_budget = 5  # the store-wide 5,000, scaled down
        store._recall._text.scored_budget = 5  # RediSearch's, the same
        for i in range(16):
            body = f"Kayak trip number {i}." if i < 6 else f"Item {i} was noted."
            await store.remember(body, vector=unit(200 + i), thread_id="b")
        answer = await store.remember("We will kayak to Zanzibarite island.", vector=unit(99), thread_id="b")
        await store.index.ensure_ready()
        query = "Who goes to Zanzibarite by kayak?"
        flt = MemoryFilter(scope=Scope(thread_id="b"))
        if store._recall._text.request(query, flt, ["content"], pool=2) is None:
            return  # valkey-search 1.0: no TEXT, KNN only
        hits = await store.recall(
            query, k=1, threshold=2.0, thread_id="b", reinforce=False
        )  # counts the words (after it, in the background)
        assert [h.item.id for h in hits] == [answer]
        await store._recall._text.settled()
        again = store._recall._text.request(query, flt, ["content"], pool=2)
        # "kayak" (7 of 17 memories, under half) passes the share cut but not the budget of 5;
        # "zanzibarite" (1) fits, and so do words no memory holds.
        assert again is not None and "zanzibarite" in again.plan.words
        assert "kayak" not in again.plan.words
        assert all("kayak" not in " ".join(args) for args in again.searches[: again.queries])
        hits = await store.recall(query, k=1, threshold=2.0, thread_id="b", reinforce=False)
        assert [h.item.id for h in hits] == [answer]
    finally:
        await store.forget_by_scope(thread_id="b")
        await store.close()


async def _search_calls(client: Any) -> int:
    stats = await client.info("commandstats")
    return int(stats.get("cmdstat_FT.SEARCH", {}).get("calls", 0))


async def test_a_long_question_sends_only_its_rarest_words_on_a_per_word_engine(
    client: Any, unique_name: str
) -> None:
    """valkey-search answers one text query per word: once the words are counted, a question of
    many words sends at most ``PER_WORD_MAX_WORDS`` of them, the rarest, and its rare word still
    brings the memory the KNN misses. RediSearch sends one query for all the words, as before."""
    store = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(DIM), discovery=False, rerank_candidates=2
    )
    try:
        for i in range(30):
            await store.remember(f"Item {i} was noted.", vector=unit(300 + i), thread_id="w")
        for i in range(6):
            await store.remember(
                f"Caroline and Melanie talked about the lake trip {i}.", vector=unit(400 + i), thread_id="w"
            )
        answer = await store.remember(
            "Caroline painted a Zanzibarite sunrise.", vector=unit(99), thread_id="w"
        )
        await store.index.ensure_ready()
        if not store._recall._text.available():
            return  # valkey-search 1.0: no TEXT, KNN only
        query = "What did Caroline and Melanie paint at the lake on their Zanzibarite trip?"
        assert len(query_words(query)) == 6 > PER_WORD_MAX_WORDS  # every one under the common share
        first = await store.recall(query, k=1, threshold=2.0, thread_id="w", reinforce=False)  # counts them
        await store._recall._text.settled()
        before = await _search_calls(client)
        hits = await store.recall(query, k=1, threshold=2.0, thread_id="w", reinforce=False)
        sent = await _search_calls(client) - before
        per_word = store.capabilities is not None and store.capabilities.engine != "redisearch"
        assert sent == 1 + (PER_WORD_MAX_WORDS if per_word else 1)  # the KNN, then the text queries
        assert [h.item.id for h in hits] == [h.item.id for h in first] == [answer]
    finally:
        await store.forget_by_scope(thread_id="w")
        await store.close()


async def test_a_scope_the_knn_reads_whole_gets_no_text_query_on_redisearch(
    client: Any, unique_name: str
) -> None:
    """Three memories in a thread: the KNN (50) finds them all, so from the second recall on
    RediSearch sends no text query, with the same hits. When the thread outgrows the KNN, the
    first recall's KNN comes back full and the next one sends the text query again."""
    store = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder(DIM), discovery=False)
    try:
        for i in range(3):
            await store.remember(f"Priya keeps a kayak number {i}.", vector=unit(700 + i), thread_id="w")
        await store.index.ensure_ready()
        if not store._recall._text.available():
            return  # valkey-search 1.0: no TEXT, KNN only
        redisearch = store.capabilities is not None and store.capabilities.engine == "redisearch"
        query = "Where does Priya keep the kayak?"

        async def recall() -> tuple[list[str], int]:
            await store._recall._text.settled()
            before = await _search_calls(client)
            hits = await store.recall(query, k=3, threshold=2.0, thread_id="w", reinforce=False)
            sent = await _search_calls(client) - before
            await store._recall._text.settled()
            return [h.item.id for h in hits], sent

        first, _ = await recall()
        second, sent = await recall()
        assert sorted(second) == sorted(first) and len(first) == 3
        # valkey-search scans a small scope with one query and still sends its text queries.
        assert sent == 1 if redisearch else sent >= 2
        await store.remember_many(
            [
                {"content": f"Item {i} was noted.", "vector": unit(800 + i), "thread_id": "w"}
                for i in range(50)
            ]
        )
        await store.index.ensure_ready()
        full, _ = await recall()  # its KNN comes back full: the text query is back from the next one
        assert len(full) == 3
        _, sent = await recall()
        assert sent >= 2
    finally:
        await store.forget_by_scope(thread_id="w")
        await store.close()


async def test_an_unscoped_word_query_counts_its_word(client: Any, unique_name: str) -> None:
    """No word count rides in a recall's round trip: an unscoped word query's reply carries its
    word's count (valkey-search: one query per word), and the other words are counted after the
    recall. The rare word still brings the memory the KNN misses, while "caroline" (in most
    memories) is left out once counted."""
    store = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(DIM), discovery=False, rerank_candidates=2
    )
    try:
        for i in range(12):
            await store.remember(f"Caroline noted item {i}.", vector=unit(500 + i), thread_id="u")
        for i in range(4):
            await store.remember(f"Melanie liked the lake trip {i}.", vector=unit(520 + i), thread_id="u")
        answer = await store.remember(
            "Caroline painted a Zanzibarite sunrise.", vector=unit(99), thread_id="u"
        )
        await store.index.ensure_ready()
        if not store._recall._text.available():
            return  # valkey-search 1.0: no TEXT, KNN only
        query = "Did Caroline paint a Zanzibarite sunrise at the lake?"
        words = query_words(query)
        assert len(words) == 5 > PER_WORD_MAX_WORDS
        per_word = store.capabilities is not None and store.capabilities.engine != "redisearch"
        await store.recall(
            "Anything noted?", k=1, threshold=2.0, reinforce=False
        )  # the first recall's own work
        await store._recall._text.settled()
        before = await _search_calls(client)
        hits = await store.recall(query, k=1, threshold=2.0, reinforce=False)
        await store._recall._text.settled()
        sent = await _search_calls(client) - before
        assert [h.item.id for h in hits] == [answer]
        # The KNN, the text queries, then (after the recall) the words no query counted.
        if per_word:
            assert sent == 1 + PER_WORD_MAX_WORDS + (len(words) - PER_WORD_MAX_WORDS)
        else:
            assert sent == 1 + 1 + len(words)
        again = store._recall._text.request(query, MemoryFilter(), ["content"], pool=2)
        assert again is not None and not again.plan.probe_words and "caroline" not in again.plan.words
        hits = await store.recall(query, k=1, threshold=2.0, reinforce=False)
        assert [h.item.id for h in hits] == [answer]
    finally:
        await store.forget_by_scope(thread_id="u")
        await store.close()


async def test_a_text_recall_reads_and_reinforces_its_hits_together(client: Any, unique_name: str) -> None:
    """Hits carry their state before this recall, exact counts included; the access is counted once."""
    store = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder(DIM), discovery=False)
    try:
        mid = await store.remember("Priya keeps bees on the roof.", thread_id="r", tags=["home"])
        await store.remember("Something else entirely.", thread_id="r")
        before = await store.get(mid)
        assert before is not None and before.access_count == 0
        counts = []
        for _ in range(3):
            hits = await store.recall("Who keeps bees?", k=1, threshold=2.0, thread_id="r")
            assert [h.item.id for h in hits] == [mid]
            assert hits[0].item.tags == ["home"] and hits[0].item.thread_id == "r"  # the whole item
            counts.append(hits[0].item.access_count)
        assert counts == [0, 1, 2]  # before each access, exact (the document's snapshot may lag)
        after = await store.get(mid)
        assert after is not None and after.access_count == 3
        hits = await store.recall("Who keeps bees?", k=1, threshold=2.0, thread_id="r", reinforce=False)
        assert hits[0].item.access_count == 3
        assert (await store.get(mid)).access_count == 3  # type: ignore[union-attr]
    finally:
        await store.forget_by_scope(thread_id="r")
        await store.close()


async def test_get_many_on_gone_and_expired_memories(client: Any, unique_name: str) -> None:
    store = MemoryStore(client=client, name=unique_name, embedder=HashingEmbedder(DIM), discovery=False)
    try:
        a = await store.remember("kept", thread_id="g")
        b = await store.remember("deleted", thread_id="g")
        await store.forget(b)
        got = await store.get_many([a, b, "never-written"])
        assert [x.id if x else None for x in got] == [a, None, None]
        assert await store.get_many([]) == []
    finally:
        await store.forget_by_scope(thread_id="g")
        await store.close()
