"""LangChain ``BaseRetriever`` over ``MemoryStore.recall``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, PrivateAttr

from ...core.models import MemoryHit
from ...errors import ValidationError
from ...store import MemoryStore
from ._runner import AnyStore, StoreRunner

__all__ = ["MemoryStoreRetriever", "hit_document"]

#: The ``recall`` options a call may override (``retriever.invoke(q, k=3, tags=["x"])``).
RECALL_OPTIONS = frozenset(
    {
        "k",
        "threshold",
        "tags",
        "weights",
        "reinforce",
        "thread_id",
        "agent_id",
        "namespace",
        "exclude_sensitivity",
        "where",
        "as_of",
        "since",
        "until",
        "tz",
    }
)


def hit_document(hit: MemoryHit) -> Document:
    """A recalled memory as a ``Document``: ``id`` the memory id, ``page_content`` its text.

    ``metadata`` is the memory's own metadata plus (these names win over its keys):
    ``score`` (the composite score recall ranks by), ``similarity`` (0..1), ``importance``,
    ``tags``, ``created_at`` and ``valid_from`` (epoch ms), ``kind``, and ``thread_id`` /
    ``agent_id`` / ``namespace`` / ``source`` / ``subject`` / ``valid_until`` when set (a past
    version's ``valid_until``, recalled ``as_of`` an instant it was current), and
    ``superseded_by`` when the hit ranks below a newer statement of the same attribute
    (same-slot supersession: likely outdated).
    """
    item = hit.item
    metadata: dict[str, Any] = dict(item.metadata)
    metadata.update(
        score=hit.score,
        similarity=hit.similarity,
        importance=item.importance,
        tags=list(item.tags),
        created_at=item.created_at,
        valid_from=item.valid_from,
        kind=item.kind,
    )
    for name in ("thread_id", "agent_id", "namespace", "source", "subject", "valid_until"):
        value = getattr(item, name)
        if value is not None:
            metadata[name] = value
    if hit.explain is not None and hit.explain.superseded_by is not None:
        metadata["superseded_by"] = hit.explain.superseded_by
    return Document(id=item.id, page_content=item.content, metadata=metadata)


async def _recall(store: MemoryStore, query: str, options: dict[str, Any]) -> list[MemoryHit]:
    return await store.recall(query, explain=True, **options)


class MemoryStoreRetriever(BaseRetriever):
    """``recall(query, ...)`` as a LangChain retriever, one ``Document`` per hit, best first.

    Args:
        store: a ``SyncMemoryStore`` (serves ``invoke`` and ``ainvoke``) or a ``MemoryStore``
            (``ainvoke``; ``invoke`` only from other threads while its loop runs); the caller
            closes either.
        k, threshold, weights, reinforce, thread_id, agent_id, namespace, exclude_sensitivity:
            ``recall``'s options (None: the store's defaults); a call overrides any of them
            as keyword arguments (``invoke(q, k=3)``).
        where, as_of, since, until, tz: ``recall``'s filter and time options, the same way
            (``invoke("Where did Ada live?", as_of="2022-06-01")``).
        recall_tags: ``recall``'s ``tags`` (all required). Named apart because a retriever's
            ``tags`` are LangChain's run tags for callbacks and tracing; a call may still
            pass ``invoke(q, tags=[...])`` for the recall.

    Documents: see ``hit_document`` (id, text, the memory's metadata, score and similarity).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Any
    k: int | None = None
    threshold: float | None = None
    recall_tags: Sequence[str] | None = None
    weights: Any = None
    reinforce: bool | None = None
    thread_id: str | None = None
    agent_id: str | None = None
    namespace: str | None = None
    exclude_sensitivity: Sequence[str] | None = None
    where: dict[str, Any] | None = None
    as_of: Any = None
    since: Any = None
    until: Any = None
    tz: str | None = None

    _runner: StoreRunner = PrivateAttr()

    def __init__(self, store: AnyStore, **options: Any) -> None:
        super().__init__(store=store, **options)  # type: ignore[call-arg]  # pydantic fields

    def model_post_init(self, context: Any, /) -> None:
        self._runner = StoreRunner(self.store)

    def _options(self, overrides: dict[str, Any]) -> dict[str, Any]:
        unknown = set(overrides) - RECALL_OPTIONS
        if unknown:
            raise ValidationError(
                f"unknown recall options {sorted(unknown)}",
                code="validation.argument",
                details={"unknown": sorted(unknown)},
            )
        options = {name: getattr(self, name) for name in RECALL_OPTIONS - {"tags"}}
        options["tags"] = self.recall_tags
        options.update(overrides)
        return {name: value for name, value in options.items() if value is not None}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        hits = self._runner.call(_recall, query, self._options(kwargs))
        return [hit_document(hit) for hit in hits]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        hits = await self._runner.acall(_recall, query, self._options(kwargs))
        return [hit_document(hit) for hit in hits]
