"""HashingEmbedder: deterministic, normalised, Unicode-aware lexical vectors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from betterdb_memory.embedders import Embedder, HashingEmbedder
from betterdb_memory.errors import ConfigurationError

REPO_ROOT = Path(__file__).resolve().parents[2]

DOCS = [
    "The user prefers dark roast coffee in the morning.",
    "Deployment to production happens every Tuesday after the standup.",
    "用户喜欢在周末去公园散步。",
    "我的护照明年三月到期，需要提前续签。",
    "Пользователь работает программистом в Казани.",
    "Завтра у меня встреча с врачом в десять утра.",
    "La réunion trimestrielle est prévue pour vendredi.",
    "🎂 birthday party on Saturday 🎉",
]


async def test_satisfies_protocol_and_names_its_space() -> None:
    """It is an Embedder whose model id carries the feature version and the dimension."""
    emb = HashingEmbedder(dimensions=256)
    assert isinstance(emb, Embedder)
    assert emb.dimensions == 256
    assert emb.model_id == "hashing-v1-256"
    assert 0 < emb.default_threshold < 1


async def test_rows_are_float32_unit_vectors_in_input_order() -> None:
    """Every row, including token-less texts, has norm 1; order follows the input."""
    emb = HashingEmbedder()
    texts = [*DOCS, "", "   ", "?!…", "a"]
    out = await emb.embed(texts)
    assert out.dtype == np.float32
    assert out.shape == (len(texts), 384)
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    single = await emb.embed([DOCS[3]])
    np.testing.assert_array_equal(out[3], single[0])


async def test_empty_and_punctuation_only_texts_share_one_fixed_vector() -> None:
    """A text without tokens gets a valid (non-zero) vector, the same for all such texts."""
    out = await HashingEmbedder().embed(["", "  \n", "...!?"])
    assert np.any(out[0])
    np.testing.assert_array_equal(out[0], out[1])
    np.testing.assert_array_equal(out[0], out[2])


async def test_empty_batch_gives_empty_matrix() -> None:
    out = await HashingEmbedder(dimensions=64).embed([])
    assert out.shape == (0, 64)


def test_same_text_same_vector_across_processes() -> None:
    """BLAKE2b, not the per-process salted hash(): another interpreter computes the same bytes."""
    text = "Valkey 向量搜索 Поиск ✨"
    mine = HashingEmbedder().embed_sync([text])[0]
    code = (
        "import sys, numpy as np; from betterdb_memory.embedders import HashingEmbedder; "
        f"sys.stdout.write(HashingEmbedder().embed_sync([{text!r}])[0].tobytes().hex())"
    )
    for seed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=REPO_ROOT,
        )
        np.testing.assert_array_equal(np.frombuffer(bytes.fromhex(proc.stdout), dtype=np.float32), mine)


def test_feature_layout_is_pinned() -> None:
    """hashing-v1 vectors never change: stored vectors stay comparable across releases."""
    vec = HashingEmbedder(dimensions=64).embed_sync(["hello world"])[0]
    nonzero = {int(i): round(float(vec[i]), 4) for i in np.flatnonzero(vec)}
    assert nonzero == PINNED_HELLO_WORLD


# hashing-v1-64 of "hello world": unigrams "hello", "world" at 1.0, bigram at 0.5.
PINNED_HELLO_WORLD = {1: -0.6667, 24: -0.6667, 32: -0.3333}


async def test_dimensions_are_validated() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ConfigurationError):
            HashingEmbedder(dimensions=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("周末 公园", 2),
        ("护照 续签", 3),
        ("программистом Казани", 4),
        ("встреча с врачом", 5),
        ("réunion vendredi", 6),
        ("coffee morning", 0),
        ("🎂 party", 7),
    ],
)
async def test_query_sharing_words_ranks_its_document_first(query: str, expected: int) -> None:
    """Chinese, Russian, French, English and emoji documents are retrieved by their own words."""
    emb = HashingEmbedder()
    docs = await emb.embed(DOCS)
    q = (await emb.embed([query]))[0]
    scores = docs @ q
    assert int(np.argmax(scores)) == expected
    assert (1 + scores[expected]) / 2 >= emb.default_threshold


async def test_large_input_is_hashed_off_the_loop_with_the_same_result() -> None:
    """Past the offload size the work moves to a thread; the vectors are the same."""
    emb = HashingEmbedder()
    texts = [f"{DOCS[i % len(DOCS)]} {i} " * 200 for i in range(10)]
    assert sum(map(len, texts)) > 50_000
    np.testing.assert_array_equal(await emb.embed(texts), emb.embed_sync(texts))
