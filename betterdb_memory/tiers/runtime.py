"""What every part of a store shares: backend, index, keys, embedder, observability, supervisor.

A ``MemoryStore`` builds one ``Runtime`` and hands it to each part (long-term memory,
recall, scopes, capacity, sessions, rolling summaries, consolidation, erasure); the
parts hold it and each other explicitly, never the store. A test can build a part
from a ``Runtime`` over a fake ``Backend``.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import Backend
from ..backend.index import IndexManager
from ..core.keys import KeySpace
from ..core.models import MemoryItem, item_from_fields
from ..core.options import ReinforceMode
from ..core.ranking import Reranker
from ..core.replies import SearchHit
from ..core.tunables import ConfigSnapshot
from ..embedders.base import Embedder, validate_embeddings
from ..embedders.lazy import LazyFunctionEmbedder
from ..lifecycle import Supervisor
from ..observability.hub import StoreObservability
from ..observability.metrics import MemoryMetrics

__all__ = ["Runtime", "Settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    """The store's validated long-term settings that are not live-config tunables."""

    default_threshold: float
    fact_source: str = "fact"
    fact_importance: float = 0.7
    dedup: bool = False
    reinforce_mode: ReinforceMode = "sync"
    reinforce_write_interval: float | None = None
    candidate_factor: int = 1
    reranker: Reranker | None = None
    rerank_candidates: int = 50
    margin: float | None = None  # the re-ranked recall's gate margin (core.ranking.Gate)
    text_candidates: int = 50  # full-text hits a re-ranked recall adds (0: KNN only)


class Runtime:
    """The shared dependencies of a store's parts (see the module docstring)."""

    def __init__(
        self,
        *,
        keys: KeySpace,
        backend: Backend,
        index: IndexManager,
        embedder: Embedder | LazyFunctionEmbedder,
        obs: StoreObservability,
        supervisor: Supervisor,
        settings: Settings,
    ) -> None:
        self.keys = keys
        self.backend = backend
        self.index = index
        self.embedder = embedder
        self.obs = obs
        self.supervisor = supervisor
        self.settings = settings

    @property
    def metrics(self) -> MemoryMetrics:
        return self.obs.metrics

    def config(self) -> ConfigSnapshot:
        """The tunables in force now (constructor values overlaid by the live config hash)."""
        return self.obs.config()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Start background work under the store's supervisor (drained by ``close``)."""
        self.supervisor.spawn(coro, name=getattr(coro, "__name__", "background"))

    async def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Embed ``texts`` and check the answer (count, length, finite values)."""
        embedder = self.embedder
        if isinstance(embedder, LazyFunctionEmbedder):
            await embedder.resolve()
        out = await embedder.embed(list(texts))
        self.metrics.observe_embedding_calls(len(texts))
        return validate_embeddings(
            out, count=len(texts), dimensions=embedder.dimensions, model_id=embedder.model_id
        )

    def item(self, hit: SearchHit) -> MemoryItem:
        """The ``MemoryItem`` of a search hit."""
        return item_from_fields(
            self.keys.memory_id_of(hit.key), hit.fields, fact_source=self.settings.fact_source
        )
