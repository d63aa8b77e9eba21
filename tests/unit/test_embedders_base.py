"""The Embedder seam: protocol, adapters, output validation, lazy extras."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import betterdb_memory.embedders as embedders
from betterdb_memory.embedders import (
    Embedder,
    FunctionEmbedder,
    HashingEmbedder,
    OnnxEmbedder,
    OpenAIEmbedder,
    as_embedder,
    check_texts,
    default_embedder,
    default_threshold_of,
    l2_normalize,
    validate_embeddings,
)
from betterdb_memory.errors import ConfigurationError, EmbeddingError, ValidationError

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_public_surface_is_sorted_and_complete() -> None:
    """``__all__`` is sorted and every name in it exists."""
    assert embedders.__all__ == sorted(embedders.__all__)
    for name in embedders.__all__:
        assert hasattr(embedders, name), name


def test_importing_the_package_imports_no_provider_sdk() -> None:
    """onnxruntime, tokenizers and openai load only when their embedder is used."""
    code = (
        "import sys, betterdb_memory.embedders; "
        "print(sorted(m for m in ('onnxruntime', 'tokenizers', 'openai') if m in sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        env=dict(os.environ),
    )
    assert proc.stdout.strip() == "[]"


def test_onnx_embedder_without_the_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing onnxruntime is a ConfigurationError naming extra 'onnx', also from default_embedder."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # find_spec and import both see "absent"
    for make in (OnnxEmbedder, default_embedder):
        with pytest.raises(ConfigurationError) as info:
            make()
        assert info.value.code == "configuration.missing_extra"
        assert info.value.details["extra"] == "onnx"
        assert "onnxruntime" in info.value.details["missing"]


def test_openai_embedder_without_the_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ConfigurationError) as info:
        OpenAIEmbedder(api_key="k")
    assert info.value.code == "configuration.missing_extra"
    assert info.value.details["extra"] == "openai"


def test_openai_embedder_without_an_api_key_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigurationError) as info:
        OpenAIEmbedder()
    assert info.value.code == "configuration.embedder_auth"


async def _double(text: str) -> list[float]:
    await asyncio.sleep(0)
    return [float(len(text)), 1.0, 0.0]


async def test_function_embedder_calls_once_per_text_and_normalises() -> None:
    """Raw vectors from the function come back as unit rows, in input order."""
    emb = FunctionEmbedder(_double, 3, "test:len")
    assert isinstance(emb, Embedder)
    out = await emb.embed(["abc", "", "abcdefg"])
    assert out.dtype == np.float32 and out.shape == (3, 3)
    np.testing.assert_allclose(out, l2_normalize(np.array([[3, 1, 0], [0, 1, 0], [7, 1, 0]])), rtol=1e-6)
    assert emb.model_id == "test:len"


async def test_function_embedder_bounds_concurrency() -> None:
    """At most max_concurrency calls are in flight, but they do overlap."""
    in_flight = peak = 0

    async def slow(text: str) -> list[float]:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return [1.0, 0.0]

    await FunctionEmbedder(slow, 2, max_concurrency=3).embed([str(i) for i in range(12)])
    assert peak == 3


@pytest.mark.parametrize(
    ("vector", "code"),
    [
        ([1.0, float("nan"), 0.0], "embedder.nonfinite"),
        ([float("inf"), 0.0, 0.0], "embedder.nonfinite"),
        ("abc", "embedder.bad_type"),
        (None, "embedder.bad_type"),
    ],
)
async def test_function_embedder_rejects_bad_vectors(vector: list[float], code: str) -> None:
    """A function that breaks the contract is the embedder's failure: an EmbeddingError."""

    async def fn(text: str) -> list[float]:
        return vector

    with pytest.raises(EmbeddingError) as info:
        await FunctionEmbedder(fn, 3).embed(["x"])
    assert info.value.code == code


async def test_function_embedder_wrong_length_is_a_dimension_mismatch() -> None:
    """A vector of another length than ``dimensions`` is a ValueError, as the reference's mismatch."""

    async def fn(text: str) -> list[float]:
        return [1.0, 2.0]

    with pytest.raises(ConfigurationError) as info:
        await FunctionEmbedder(fn, 3).embed(["x"])
    assert isinstance(info.value, ValueError)
    assert info.value.code == "configuration.dimensions"
    assert (info.value.details["expected"], info.value.details["got"]) == (3, 2)


async def test_function_embedder_refuses_a_sync_function() -> None:
    """A plain function would block the loop; it is refused with a clear message."""
    with pytest.raises(ConfigurationError, match="not async"):
        await FunctionEmbedder(lambda t: [1.0], 1).embed(["x"])  # type: ignore[arg-type, return-value]


async def test_as_embedder_returns_an_embedder_unchanged_and_wraps_callables() -> None:
    hashing = HashingEmbedder()
    assert as_embedder(hashing) is hashing
    assert as_embedder(hashing, dimensions=384) is hashing
    wrapped = as_embedder(_double, dimensions=3, model_id="fn:len")
    assert isinstance(wrapped, FunctionEmbedder)
    assert wrapped.model_id == "fn:len"
    assert (await wrapped.embed(["ab"])).shape == (1, 3)


def test_as_embedder_refuses_what_it_cannot_use() -> None:
    with pytest.raises(ConfigurationError, match="dimensions"):
        as_embedder(_double)
    with pytest.raises(ConfigurationError) as info:
        as_embedder(HashingEmbedder(), dimensions=128)
    assert info.value.code == "configuration.dimensions"
    with pytest.raises(ConfigurationError):
        as_embedder("not an embedder")
    with pytest.raises(ConfigurationError):
        as_embedder(HashingEmbedder)  # the class, not an instance


def test_as_embedder_accepts_an_embedder_whose_dimension_is_not_known_yet() -> None:
    """The structural check does not evaluate ``dimensions`` (which may raise until first use)."""
    pytest.importorskip("openai")
    emb = OpenAIEmbedder("my-local-model", api_key="k", base_url="http://127.0.0.1:9/v1")
    assert as_embedder(emb) is emb
    with pytest.raises(ConfigurationError) as info:
        _ = emb.dimensions
    assert info.value.code == "configuration.dimensions_unknown"


class _Raw:
    """A third-party embedder returning whatever it is given."""

    def __init__(self, matrix: object) -> None:
        self.matrix = matrix

    @property
    def dimensions(self) -> int:
        return 2

    @property
    def model_id(self) -> str:
        return "raw"

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.matrix, dtype=np.float32)


def test_protocol_is_structural() -> None:
    assert isinstance(_Raw([[1, 0]]), Embedder)
    assert as_embedder(_Raw([[1, 0]])).model_id == "raw"


def test_validate_embeddings_checks_shape_and_values_and_normalises() -> None:
    out = validate_embeddings([[3.0, 4.0], [0.0, 0.0]], count=2, dimensions=2, model_id="m")
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])
    assert out.dtype == np.float32 and out.flags.c_contiguous
    with pytest.raises(EmbeddingError, match=r"expected \(3, 2\)"):
        validate_embeddings([[1.0, 0.0]], count=3, dimensions=2, model_id="m")
    with pytest.raises(EmbeddingError):
        validate_embeddings(np.zeros((1, 3)), count=1, dimensions=2, model_id="m")
    with pytest.raises(EmbeddingError) as info:
        validate_embeddings([[1.0, np.nan], [1.0, 0.0]], count=2, dimensions=2, model_id="m")
    assert info.value.details["rows"] == [0]
    assert info.value.code == "embedder.nonfinite"
    with pytest.raises(EmbeddingError) as info:
        validate_embeddings("nope", count=1, dimensions=2, model_id="m")
    assert info.value.code == "embedder.bad_type"


def test_default_threshold_of_reads_only_valid_thresholds() -> None:
    assert default_threshold_of(HashingEmbedder()) == HashingEmbedder.default_threshold
    assert default_threshold_of(_Raw([[1, 0]])) is None
    for bad in (0, 1.5, float("nan"), True, "0.7", None):
        holder = _Raw([[1, 0]])
        holder.default_threshold = bad  # type: ignore[attr-defined]
        assert default_threshold_of(holder) is None


# -- a bare string is not a list of texts ----------------------------------------------


async def _vector_fn(text: str) -> list[float]:
    return [1.0, float(len(text))]


def _shipped_and_wrapped() -> list[Embedder]:
    """Every embedder that takes ``embed(texts)`` without a model download or a network call."""
    return [HashingEmbedder(), FunctionEmbedder(_vector_fn, 2), OnnxEmbedder(), OpenAIEmbedder(api_key="k")]


@pytest.mark.parametrize("bare", ["hello world", b"hello world", ""], ids=["str", "bytes", "empty-str"])
async def test_a_bare_string_is_refused_by_every_embedder(bare: object) -> None:
    """``embed("hello world")`` used to embed 11 one-letter texts; now it is a clear error.

    The same error everywhere (the shipped embedders and the function wrapper), raised
    before any model is loaded or any request is sent: the fix is to pass ``[text]``.
    """
    for emb in _shipped_and_wrapped():
        with pytest.raises(ValidationError) as info:
            await emb.embed(bare)  # type: ignore[arg-type]
        assert info.value.code == "validation.type", emb
        assert "[text]" in info.value.message
        assert info.value.details["argument"] == "texts"


async def test_one_text_in_a_list_is_one_vector() -> None:
    for emb in (HashingEmbedder(), FunctionEmbedder(_vector_fn, 2)):
        out = await emb.embed(["hello world"])
        assert out.shape == (1, emb.dimensions)


def test_embed_sync_refuses_a_bare_string_too() -> None:
    with pytest.raises(ValidationError) as info:
        HashingEmbedder().embed_sync("hello world")
    assert info.value.code == "validation.type"


def test_check_texts_accepts_any_iterable_of_strings_and_names_a_bad_item() -> None:
    assert check_texts(("a", "b")) == ["a", "b"]
    assert check_texts(t for t in ["x"]) == ["x"]
    assert check_texts([]) == []
    with pytest.raises(ValidationError) as info:
        check_texts(["ok", 3])
    assert info.value.code == "validation.text_type" and info.value.details["index"] == 1
    with pytest.raises(ValidationError) as info:
        check_texts(42)
    assert info.value.code == "validation.type"
