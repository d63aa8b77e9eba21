"""Embedders: the ``Embedder`` protocol and the implementations that ship.

* ``OnnxEmbedder`` (extra ``onnx``): all-MiniLM-L6-v2, local, semantic; the default.
* ``OpenAIEmbedder`` (extra ``openai``): any OpenAI-compatible embeddings endpoint,
  with bounded retries and an optional Valkey cache.
* ``HashingEmbedder``: deterministic, numpy only; for tests and offline demos.
* ``FunctionEmbedder`` / ``as_embedder``: wrap your own ``async fn(text) -> list[float]``.

Importing this package imports neither onnxruntime nor openai: each is imported
when its embedder is first constructed or used.
"""

from __future__ import annotations

from .base import (
    Embedder,
    EmbeddingFunction,
    FunctionEmbedder,
    as_embedder,
    check_texts,
    default_margin_of,
    default_threshold_of,
    l2_normalize,
    validate_embeddings,
)
from .hashing import HashingEmbedder
from .onnx import OnnxEmbedder, default_embedder
from .openai import OpenAIEmbedder

__all__ = [
    "Embedder",
    "EmbeddingFunction",
    "FunctionEmbedder",
    "HashingEmbedder",
    "OnnxEmbedder",
    "OpenAIEmbedder",
    "as_embedder",
    "check_texts",
    "default_embedder",
    "default_margin_of",
    "default_threshold_of",
    "l2_normalize",
    "validate_embeddings",
]
