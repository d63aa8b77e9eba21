"""LangChain ``Embeddings`` over this library's embedders (ONNX MiniLM, hashing, OpenAI, your own)."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.embeddings import Embeddings

from ...embedders.base import Embedder, FloatMatrix
from ._runner import run_blocking

__all__ = ["MemoryStoreEmbeddings"]


class MemoryStoreEmbeddings(Embeddings):
    """An ``Embedder`` as LangChain ``Embeddings``: the vectors the store itself writes and searches.

    Args:
        embedder: any ``Embedder`` (``store.embedder``, ``HashingEmbedder()``, ...); None:
            the shipped default, ``OnnxEmbedder`` (extra ``onnx``).

    Vectors are L2-normalised float32 values returned as Python floats. The sync methods
    run the embedder on the adapters' shared loop thread (embedders hold no connection).
    """

    def __init__(self, embedder: Embedder | None = None) -> None:
        if embedder is None:
            from ...embedders import default_embedder

            embedder = default_embedder()
        self.embedder = embedder

    @property
    def dimensions(self) -> int:
        """The length of every vector."""
        return self.embedder.dimensions

    async def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        matrix: FloatMatrix = await self.embedder.embed(list(texts))
        rows: list[list[float]] = matrix.astype(float).tolist()
        return rows

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        return run_blocking(self._embed, texts)

    def embed_query(self, text: str) -> list[float]:
        """The vector of ``text``."""
        return run_blocking(self._embed, [text])[0]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """One vector per text, in order."""
        return await self._embed(texts)

    async def aembed_query(self, text: str) -> list[float]:
        """The vector of ``text``."""
        return (await self._embed([text]))[0]
