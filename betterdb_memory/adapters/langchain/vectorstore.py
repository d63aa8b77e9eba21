"""LangChain ``VectorStore`` over L2 memories: your ids, upserts, ``get_by_ids``, scope, tag and metadata filters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from ...core.models import MemoryHit, MemoryItem
from ...core.requests import MemoryInput
from ...core.scoring import Weights
from ...errors import ValidationError
from ...store import MemoryStore
from ._runner import AnyStore, StoreRunner
from .embeddings import MemoryStoreEmbeddings

__all__ = ["MemoryStoreVectorStore"]

#: Searches rank by vector similarity alone (no recency or importance), as a vector store does.
SIMILARITY_ONLY = Weights(similarity=1.0, recency=0.0, importance=0.0)
#: The cosine-distance ceiling that keeps every hit: a vector store returns the k nearest, however far.
NO_THRESHOLD = 2.0
#: What ``filter=`` may name as the constructor's scope does: the scope fields and tags.
FILTER_KEYS = frozenset({"thread_id", "agent_id", "namespace", "tags"})
#: Built-in fields ``filter=`` passes to the store's ``where=`` (with its declared metadata fields).
WHERE_KEYS = frozenset({"source", "importance", "created_at", "valid_from", "$and", "$or", "$not"})


class MemoryStoreVectorStore(VectorStore):
    """L2 memories as a LangChain vector store: a document is a memory, its id the memory id.

    Args:
        store: a ``SyncMemoryStore`` (sync and async methods) or a ``MemoryStore`` (async
            methods; see ``_runner`` for sync ones); the caller closes it.
        embedding: LangChain ``Embeddings`` to compute the vectors with (their length must be
            the store's dimensions); None: the store's own embedder, as ``remember`` and
            ``recall`` use it.
        thread_id, agent_id, namespace: the scope every document is written in and every
            search, ``get_by_ids`` and ``delete()`` without ids is limited to.
        tags: tags written on every document; searches need all of them too.
        importance, ttl: ``remember``'s options for every document written.

    ``add_texts(..., ids=[...])`` upserts (a memory written with an existing id replaces
    it: ``remember(id=...)``); documents without an id get the store's. Metadata is kept
    as given (a JSON object) and returned unchanged. ``similarity_search*`` rank by cosine
    similarity alone, keep the k nearest whatever their distance and do not reinforce;
    the score is the similarity ``1 - distance / 2`` (0..1, higher is closer). ``filter``
    takes ``thread_id`` / ``agent_id`` / ``namespace`` (replacing the constructor's) and
    ``tags`` (added to the constructor's, all required); the store's declared
    ``metadata_fields``, ``source``, ``importance``, ``created_at``, ``valid_from``, ``$and``
    / ``$or`` / ``$not``, and a scope field or ``tags`` given an operator object
    (``{"tags": {"$in": [...]}}``) go to the store's ``where=`` (its operators; ANDed with
    the constructor's scope, so they only narrow it). Other metadata is not indexed and
    cannot be filtered on (``validation.filter``).
    """

    def __init__(
        self,
        store: AnyStore,
        *,
        embedding: Embeddings | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        ttl: int | None = None,
    ) -> None:
        self._runner = StoreRunner(store)
        self._embedding = embedding
        self.scope = {"thread_id": thread_id, "agent_id": agent_id, "namespace": namespace}
        self.tags = list(tags or [])
        self.importance = importance
        self.ttl = ttl

    @property
    def embeddings(self) -> Embeddings:
        """The ``embedding`` given, else the store's embedder as ``MemoryStoreEmbeddings``."""
        if self._embedding is not None:
            return self._embedding
        return MemoryStoreEmbeddings(self._runner.store.embedder)  # type: ignore[arg-type]

    # -- writing -----------------------------------------------------------------------------

    def _entries(
        self,
        texts: Iterable[str],
        metadatas: Sequence[Mapping[str, Any]] | None,
        ids: Sequence[str | None] | None,
    ) -> list[MemoryInput]:
        texts = list(texts)
        for name, given in (("metadatas", metadatas), ("ids", ids)):
            if given is not None and len(given) != len(texts):
                raise ValidationError(
                    f"{name} has {len(given)} entries for {len(texts)} texts",
                    code="validation.length",
                    details={"argument": name},
                )
        entries: list[MemoryInput] = []
        scope = self.scope
        for i, text in enumerate(texts):
            entry: MemoryInput = {
                "content": text,
                "thread_id": scope["thread_id"],
                "agent_id": scope["agent_id"],
                "namespace": scope["namespace"],
            }
            if self.tags:
                entry["tags"] = self.tags
            if self.importance is not None:
                entry["importance"] = self.importance
            if self.ttl is not None:
                entry["ttl"] = self.ttl
            if metadatas is not None and metadatas[i]:
                entry["metadata"] = dict(metadatas[i])
            if ids is not None and ids[i] is not None:
                entry["id"] = ids[i]
            entries.append(entry)
        return entries

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Write ``texts`` as memories (upserting those whose id exists); returns their ids, in order."""
        entries = self._entries(texts, metadatas, ids)
        if self._embedding is not None and entries:
            vectors = self._embedding.embed_documents([e["content"] for e in entries])
            for entry, vector in zip(entries, vectors, strict=True):
                entry["vector"] = vector
        return self._runner.call(_write, entries)

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Write ``texts`` as memories (upserting those whose id exists); returns their ids, in order."""
        entries = self._entries(texts, metadatas, ids)
        if self._embedding is not None and entries:
            vectors = await self._embedding.aembed_documents([e["content"] for e in entries])
            for entry, vector in zip(entries, vectors, strict=True):
                entry["vector"] = vector
        return await self._runner.acall(_write, entries)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        store: AnyStore | None = None,
        **kwargs: Any,
    ) -> MemoryStoreVectorStore:
        """A vector store over ``store`` (required keyword; the other keywords as the constructor's) with ``texts`` added."""
        vs = cls._build(embedding, store, kwargs)
        vs.add_texts(texts, metadatas, ids=ids)
        return vs

    @classmethod
    async def afrom_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        store: AnyStore | None = None,
        **kwargs: Any,
    ) -> MemoryStoreVectorStore:
        """As ``from_texts``, with ``aadd_texts``."""
        vs = cls._build(embedding, store, kwargs)
        await vs.aadd_texts(texts, metadatas, ids=ids)
        return vs

    @classmethod
    def _build(
        cls, embedding: Embeddings | None, store: AnyStore | None, kwargs: dict[str, Any]
    ) -> MemoryStoreVectorStore:
        if store is None:
            raise ValidationError(
                "from_texts needs store=", code="validation.argument", details={"argument": "store"}
            )
        if isinstance(embedding, MemoryStoreEmbeddings):
            embedding = None  # the store's own kind of vectors; let it embed
        return cls(store, embedding=embedding, **kwargs)

    # -- reading -----------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids that exist in this store's scope (missing ids are left out)."""
        return self._documents(self._runner.call(_get_many, list(ids)))

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids that exist in this store's scope (missing ids are left out)."""
        return self._documents(await self._runner.acall(_get_many, list(ids)))

    def similarity_search(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents nearest to ``query``, nearest first."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter=filter, **kwargs)]

    async def asimilarity_search(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents nearest to ``query``, nearest first."""
        pairs = await self.asimilarity_search_with_score(query, k, filter=filter, **kwargs)
        return [doc for doc, _ in pairs]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """``(document, similarity)`` for the ``k`` nearest to ``query``, nearest first (similarity 0..1)."""
        vector = self._embedding.embed_query(query) if self._embedding is not None else None
        return self._pairs(self._runner.call(_search, query, vector, k, self._filter(filter)))

    async def asimilarity_search_with_score(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """``(document, similarity)`` for the ``k`` nearest to ``query``, nearest first (similarity 0..1)."""
        vector = await self._embedding.aembed_query(query) if self._embedding is not None else None
        return self._pairs(await self._runner.acall(_search, query, vector, k, self._filter(filter)))

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents nearest to ``embedding`` (the store's dimensions), nearest first."""
        pairs = self._pairs(self._runner.call(_search, None, embedding, k, self._filter(filter)))
        return [doc for doc, _ in pairs]

    async def asimilarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` documents nearest to ``embedding`` (the store's dimensions), nearest first."""
        hits = await self._runner.acall(_search, None, embedding, k, self._filter(filter))
        return [doc for doc, _ in self._pairs(hits)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # The score is already the similarity on 0..1 (higher is closer).
        return lambda score: score

    # -- deleting ----------------------------------------------------------------------------

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete these ids (missing ones are ignored); None: every document in this store's scope.

        Raises:
            ValidationError: ``ids`` is None and the vector store has no scope or tags
                (that would delete every memory of the store).
        """
        return self._runner.call(_delete, ids, self._scope_filter_for_delete(ids))

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """As ``delete``."""
        return await self._runner.acall(_delete, ids, self._scope_filter_for_delete(ids))

    # -- helpers -----------------------------------------------------------------------------

    def _filter(self, flt: Mapping[str, Any] | None) -> dict[str, Any]:
        flt = dict(flt or {})
        declared = self._runner.store.metadata_fields.specs
        where = {
            k: flt.pop(k)
            for k in list(flt)
            if k in WHERE_KEYS or k in declared or (k in FILTER_KEYS and isinstance(flt[k], Mapping))
        }
        unknown = set(flt) - FILTER_KEYS
        if unknown:
            allowed = sorted({*FILTER_KEYS, *WHERE_KEYS, *declared})
            raise ValidationError(
                f"filter keys {sorted(unknown)} are not indexed; a filter takes {allowed} "
                "(declare a metadata key in the store's metadata_fields to filter on it)",
                code="validation.filter",
                details={"unknown": sorted(unknown)},
            )
        out: dict[str, Any] = {k: v for k, v in self.scope.items() if v is not None}
        if where:
            out["where"] = where
        for name in ("thread_id", "agent_id", "namespace"):
            if flt.get(name) is not None:
                out[name] = flt[name]
        extra = flt.get("tags") or []
        if isinstance(extra, str):
            extra = [extra]
        tags = [*self.tags, *(t for t in extra if t not in self.tags)]
        if tags:
            out["tags"] = tags
        return out

    def _scope_filter_for_delete(self, ids: list[str] | None) -> dict[str, Any]:
        flt = self._filter(None)
        if ids is None and not flt:
            raise ValidationError(
                "delete() without ids deletes a scope; this vector store has no thread_id, agent_id,"
                " namespace or tags, so it would delete every memory of the store",
                code="validation.argument",
                details={"argument": "ids"},
            )
        return flt

    def _documents(self, items: Sequence[MemoryItem | None]) -> list[Document]:
        return [self._document(item) for item in items if item is not None and self._owns(item)]

    def _owns(self, item: MemoryItem) -> bool:
        if any(v is not None and getattr(item, k) != v for k, v in self.scope.items()):
            return False
        return set(self.tags) <= set(item.tags)

    @staticmethod
    def _document(item: MemoryItem) -> Document:
        return Document(id=item.id, page_content=item.content, metadata=dict(item.metadata))

    def _pairs(self, hits: list[MemoryHit]) -> list[tuple[Document, float]]:
        return [(self._document(hit.item), hit.similarity) for hit in hits]


async def _write(store: MemoryStore, entries: list[MemoryInput]) -> list[str]:
    if not entries:
        return []
    ids = [e.get("id") for e in entries]
    given = [i for i in ids if i is not None]
    if len(given) == len(set(given)):
        return await store.remember_many(entries)
    # The same id twice in one call: write in order, so the last one wins as an upsert would.
    return [(await store.remember_many([entry]))[0] for entry in entries]


async def _get_many(store: MemoryStore, ids: list[str]) -> list[MemoryItem | None]:
    return await store.get_many(ids) if ids else []


async def _search(
    store: MemoryStore, query: str | None, vector: Sequence[float] | None, k: int, flt: dict[str, Any]
) -> list[MemoryHit]:
    if vector is None:
        vector = (await store.embedder.embed([query or ""]))[0]
    # By vector, without the query text: KNN alone, as a vector store's contract says (no
    # full-text candidates), every hit kept, nothing reinforced by a search.
    hits = await store.recall_by_vector(
        vector, k=k, threshold=NO_THRESHOLD, weights=SIMILARITY_ONLY, reinforce=False, **flt
    )
    return sorted(hits, key=lambda hit: hit.distance)


async def _delete(store: MemoryStore, ids: list[str] | None, flt: dict[str, Any]) -> bool:
    if ids is None:
        await store.forget_by_scope(**flt)
        return True
    await asyncio.gather(*(store.forget(i) for i in ids))
    return True
