"""What every part of a store shares: backend, index, keys, embedder, observability, supervisor.

A ``MemoryStore`` builds one ``Runtime`` and hands it to each part (long-term memory,
recall, scopes, capacity, sessions, rolling summaries, consolidation, erasure); the
parts hold it and each other explicitly, never the store. A test can build a part
from a ``Runtime`` over a fake ``Backend``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

import numpy as np

from ..backend import Backend
from ..backend.index import IndexManager
from ..core.filter_fields import MetadataFields
from ..core.filter_query import require_filter_queries
from ..core.filters import Node
from ..core.keys import KeySpace
from ..core.models import MemoryItem, item_from_fields
from ..core.options import ReinforceMode
from ..core.query import MemoryFilter, build_filter
from ..core.ranking import Reranker
from ..core.replies import SearchHit
from ..core.tunables import ConfigSnapshot
from ..core.where import check_query_size, compile_for, names_declared, parse
from ..embedders.base import Embedder, validate_embeddings
from ..embedders.lazy import LazyFunctionEmbedder
from ..errors import ValidationError
from ..lifecycle import Supervisor
from ..observability.hub import StoreObservability
from ..observability.metrics import MemoryMetrics

__all__ = ["ReadGuard", "Runtime", "Settings"]

T = TypeVar("T")


class ReadGuard(Protocol):
    """Runs a read so that it is answered as repaired (``tiers.subject_repair.SubjectRepair.read``)."""

    def __call__(
        self, operation: str, read: Callable[[], Awaitable[T]], /, *, beside: bool = True
    ) -> Awaitable[T]: ...


async def _as_is(operation: str, read: Callable[[], Awaitable[T]], /, *, beside: bool = True) -> T:
    del operation, beside
    return await read()


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
    text_timeout_ms: int = 500  # the full-text queries' budget (core.text_query.TEXT_TIMEOUT_MS)
    implicit_updates: bool = True  # same-slot supersession for questions about the present


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
        metadata_fields: MetadataFields | None = None,
    ) -> None:
        self.keys = keys
        self.backend = backend
        self.index = index
        self.embedder = embedder
        self.obs = obs
        self.supervisor = supervisor
        self.settings = settings
        # The store's declared metadata fields (``metadata_fields=``): written with every
        # memory (``filter_fields.index_fields``) and filterable by ``where=``.
        self.metadata_fields = metadata_fields or MetadataFields()
        # Every read runs through it (its operation's name, the read): the subjects' repair
        # of writes left half-done by a crash, looked for beside the read and the read sent
        # again when it repaired anything (``tiers.subject_repair``, set by ``Subjects``).
        # The read may run twice: it must send only reads, or a repair's own writes
        # (``beside=False``: a read that decides writes of its own, repaired first).
        self.read: ReadGuard = _as_is

    @property
    def metrics(self) -> MemoryMetrics:
        return self.obs.metrics

    def config(self) -> ConfigSnapshot:
        """The tunables in force now (constructor values overlaid by the live config hash)."""
        return self.obs.config()

    def parse_where(self, where: object) -> Node | None:
        """A ``where=`` argument checked against the declared fields, before any I/O (None: no filter)."""
        return parse(where, self.metadata_fields)

    def with_where(
        self, flt: MemoryFilter, node: Node | None, *, operation: str, filter_only: bool
    ) -> MemoryFilter:
        """``flt`` with a parsed ``where`` compiled for the index in use (after ``ensure_ready``).

        ``filter_only``: the query has no KNN (list, count, forget, consolidation), which
        valkey-search 1.0 cannot run: a ``CommandNotSupportedError`` then, never a scan.

        Raises:
            ValidationError: a field the index in use lacks (``validation.filter_field``,
                reason ``indexing``), a query too long (``validation.filter_size``).
            CommandNotSupportedError: ``server.filter_unsupported``.
        """
        if node is None:
            return flt
        caps = self.index.caps
        if filter_only:
            require_filter_queries(caps, f"{operation} with where=")
        out = replace(flt, where=compile_for(node, caps, self.index.layout))
        if out.as_of is not None and out.where is not None and names_declared(out.where):
            raise ValidationError(
                "as_of reads superseded versions from the history index, which does not hold the "
                "declared metadata fields: filter on built-in fields with as_of",
                code="validation.filter_field",
                details={"argument": "where", "reason": "history", "fields": list(out.where.fields)},
            )
        check_query_size(build_filter(out, self.index.layout))
        return out

    async def ready(self, operation: str) -> None:
        """Before a read: the index ready (``ensure_ready``); the read itself then runs through ``read``."""
        del operation
        await self.index.ensure_ready()

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
