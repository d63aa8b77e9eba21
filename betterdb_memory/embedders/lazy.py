"""An ``embed_fn`` whose vector length is learned from its first answer (the reference's way)."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError
from .base import Embedder, EmbeddingFunction, as_embedder

__all__ = ["LazyFunctionEmbedder"]


class LazyFunctionEmbedder:
    """Wraps a plain ``async fn(text) -> list[float]`` of unknown dimension.

    ``dimensions`` is 0 until ``resolve()`` asks the function once (``"probe"``) and
    keeps its length; the store resolves it before it creates or checks the index.
    """

    def __init__(self, fn: EmbeddingFunction) -> None:
        self._fn = fn
        self._inner: Embedder | None = None
        self.model_id = f"function:{getattr(fn, '__qualname__', type(fn).__name__)}"

    @property
    def dimensions(self) -> int:
        if self._inner is None:
            return 0
        return self._inner.dimensions

    async def resolve(self) -> Embedder:
        if self._inner is None:
            probe_vector = await self._fn("probe")
            try:
                size = len(probe_vector)
            except TypeError:
                size = 0
            if size == 0:
                raise ConfigurationError(
                    "embed_fn returned an empty embedding; cannot learn the vector dimension",
                    code="configuration.dimensions",
                )
            self._inner = as_embedder(self._fn, dimensions=size, model_id=self.model_id)
        return self._inner

    async def embed(self, texts: list[str]) -> Any:
        return await (await self.resolve()).embed(texts)
