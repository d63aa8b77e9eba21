"""OnnxEmbedder on the real int8 MiniLM model from the ``onnx`` extra (no network, no server)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="needs the 'onnx' extra")

from betterdb_memory.embedders import Embedder, OnnxEmbedder, default_embedder
from betterdb_memory.embedders.onnx_windows import split_ids
from betterdb_memory.errors import ConfigurationError, ValidationError

pytestmark = pytest.mark.integration

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "我喜欢在周末和朋友一起喝茶聊天。",
    "Пользователь предпочитает отвечать коротко.",
    "🎉🚀✨",
    "",
    "Deploys happen on Tuesdays after the standup meeting, unless the release manager says otherwise.",
    "a",
]


@pytest.fixture(scope="module")
def embedder() -> OnnxEmbedder:
    """One embedder for the module: the model loads once (about half a second)."""
    return OnnxEmbedder()


@pytest.fixture(scope="module")
def pooling() -> OnnxEmbedder:
    """``long_text="pool"``: long texts embedded in windows."""
    return OnnxEmbedder(long_text="pool")


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


async def test_it_is_a_384_dimension_embedder(embedder: OnnxEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert embedder.dimensions == 384
    assert embedder.model_id == "onnx:all-MiniLM-L6-v2-int8"
    assert isinstance(default_embedder(), OnnxEmbedder)


async def test_rows_are_unit_float32_including_unicode_and_empty(embedder: OnnxEmbedder) -> None:
    """Chinese, Russian, emoji-only and the empty string all give finite unit vectors."""
    out = await embedder.embed(TEXTS)
    assert out.dtype == np.float32
    assert out.shape == (len(TEXTS), 384)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert len({row.tobytes() for row in out}) == len(TEXTS)  # no two texts collapse to one vector


async def test_a_batch_equals_the_texts_embedded_one_by_one(embedder: OnnxEmbedder) -> None:
    """Padding and length-sorting inside a batch do not change any text's vector."""
    batch = await embedder.embed(TEXTS)
    singles = np.vstack([await embedder.embed([t]) for t in TEXTS])
    np.testing.assert_allclose(batch, singles, atol=1e-5)


async def test_small_batch_size_gives_the_same_vectors(embedder: OnnxEmbedder) -> None:
    small = OnnxEmbedder(batch_size=2)
    np.testing.assert_allclose(await small.embed(TEXTS), await embedder.embed(TEXTS), atol=1e-5)


async def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: OnnxEmbedder) -> None:
    anchor, paraphrase, unrelated = await embedder.embed(
        [
            "The user is allergic to peanuts.",
            "Peanuts cause an allergic reaction for this user.",
            "The quarterly sales report is due on Friday.",
        ]
    )
    assert cos(anchor, paraphrase) > cos(anchor, unrelated) + 0.3
    assert (1 + cos(anchor, paraphrase)) / 2 >= embedder.default_threshold > (1 + cos(anchor, unrelated)) / 2


async def test_cross_lingual_pairs_stay_apart_from_unrelated_text(embedder: OnnxEmbedder) -> None:
    """A Chinese text is closer to itself reworded than to an English sentence on another topic."""
    a, b, c = await embedder.embed(
        ["我明天要去北京出差。", "明天我去北京出差。", "The printer is out of toner."]
    )
    assert cos(a, b) > cos(a, c)


async def test_texts_are_truncated_at_max_length_by_default(embedder: OnnxEmbedder) -> None:
    """``long_text="truncate"``: past 256 tokens the rest is ignored, so the tail does not matter."""
    head = "memory " * 300
    long_a, long_b = await embedder.embed([head + "apples and pears", head + "a completely different ending"])
    np.testing.assert_allclose(long_a, long_b, atol=1e-6)


async def test_pool_reads_all_of_a_long_text(pooling: OnnxEmbedder) -> None:
    """``long_text="pool"``: the tail of a long text changes its vector (the last window holds it)."""
    head = "memory " * 300
    long_a, long_b = await pooling.embed([head + "apples and pears", head + "a completely different ending"])
    assert cos(long_a, long_b) < 1 - 1e-3
    np.testing.assert_allclose(np.linalg.norm([long_a, long_b], axis=1), 1.0, atol=1e-5)


async def test_a_long_text_is_the_mean_of_its_windows_embedded_alone(
    embedder: OnnxEmbedder, pooling: OnnxEmbedder
) -> None:
    """The pooled vector is the renormalised mean of its windows' vectors; the first window is the truncated text."""
    text = " ".join(f"sentence number {i} talks about topic {i % 7}." for i in range(120))
    [pooled] = await pooling.embed([text])
    embedder._ensure_loaded()
    truncated = embedder._tokenizer.encode(text).ids
    windows = split_ids(pooling._tokenizer.encode(text).ids, 256, 32)
    assert len(windows) >= 3 and windows[0] == list(truncated)
    alone = np.vstack([pooling._run([w]) for w in windows])
    mean = alone.mean(axis=0)
    np.testing.assert_allclose(pooled, mean / np.linalg.norm(mean), atol=1e-5)


async def test_texts_that_fit_get_the_same_bits_from_both_modes(
    embedder: OnnxEmbedder, pooling: OnnxEmbedder
) -> None:
    """Short texts, alone or beside long ones in one call, get exactly the vectors truncation gives."""
    long_text = " ".join(f"paragraph {i} of a pasted document about invoices." for i in range(80))
    for texts in (TEXTS, [*TEXTS, long_text], [long_text, *TEXTS, long_text]):
        pooled, truncated = await pooling.embed(texts), await embedder.embed(texts)
        short = [i for i, t in enumerate(texts) if t != long_text]
        assert pooled[short].tobytes() == truncated[short].tobytes()
        if len(short) < len(texts):
            assert not np.array_equal(pooled, truncated)  # the long ones do differ


async def test_concurrent_first_calls_load_the_model_once() -> None:
    """Calls racing on a fresh embedder share one session (the load is locked)."""
    fresh = OnnxEmbedder()
    sessions: list[object] = []
    original = fresh._load
    lock = threading.Lock()

    def counting_load() -> None:
        with lock:
            sessions.append(object())
        original()

    fresh._load = counting_load  # type: ignore[method-assign]
    results = await asyncio.gather(*(fresh.embed([t]) for t in TEXTS))
    assert len(sessions) == 1
    assert all(r.shape == (1, 384) for r in results)


async def test_empty_input_needs_no_model() -> None:
    out = await OnnxEmbedder().embed([])
    assert out.shape == (0, 384)


async def test_non_string_input_is_a_validation_error(embedder: OnnxEmbedder) -> None:
    with pytest.raises(ValidationError) as info:
        await embedder.embed(["ok", 3])  # type: ignore[list-item]
    assert info.value.code == "validation.text_type"
    assert info.value.details == {"argument": "texts", "index": 1}


def test_arguments_are_validated() -> None:
    for kwargs in (
        {"batch_size": 0},
        {"max_length": 1},
        {"max_length": 513},
        {"intra_op_threads": 0},
        {"long_text": "chunk"},
    ):
        with pytest.raises(ConfigurationError):
            OnnxEmbedder(**kwargs)  # type: ignore[arg-type]


def test_long_text_is_named_in_the_error_and_the_repr() -> None:
    with pytest.raises(ConfigurationError) as info:
        OnnxEmbedder(long_text="chunk")  # type: ignore[arg-type]
    assert info.value.code == "configuration.invalid"
    assert info.value.details == {"argument": "long_text", "value": "'chunk'"}
    assert "long_text='truncate'" in repr(OnnxEmbedder())
    assert "long_text='pool'" in repr(OnnxEmbedder(long_text="pool"))
