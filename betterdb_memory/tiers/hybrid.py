"""The full-text half of a hybrid recall: candidates the KNN misses, found by the query's words.

A small sentence model places the memory that answers a question only a little
nearer than the memories around it, and the KNN top 50 holds the answer for about
three questions in four (LoCoMo). The engine's full-text index finds memories that
share the question's rarer words wherever they sit in the vector space: with them,
nine in ten (``bench/results/quality-research.md``). They join the KNN candidates and
everything is re-ranked together (``core.ranking``).

Per engine (``core.query.text_search_args``): RediSearch answers one BM25-scored query
for all the words; valkey-search >= 1.2 one query per word, whose union is ranked here
by the same lexical score the re-ranker uses, keeping the best ``text_candidates``;
engines without TEXT fields (valkey-search 1.0), or an index whose ``content`` is not
one, keep the KNN-only path. A text-only candidate's cosine distance is computed here
from its stored vector, so every candidate is scored on the same scale.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core.codec import as_text, decode_vector, to_float
from ..core.models import MemoryItem, item_from_fields
from ..core.query import (
    CHECK_FIELDS,
    VECTOR_FIELD,
    MemoryFilter,
    item_matches,
    text_search_args,
)
from ..core.ranking import HybridRanker, Reranker, query_words
from ..core.replies import parse_search_reply
from .documents import Documents
from .runtime import Runtime

__all__ = ["TextCandidates"]

_DEFAULT_RANKER = HybridRanker()


class TextCandidates:
    """Builds the text queries of a hybrid recall and turns their replies into candidates."""

    def __init__(self, rt: Runtime, docs: Documents) -> None:
        self._rt = rt
        self._docs = docs

    def available(self) -> bool:
        """Whether the engine and the index in use can answer a full-text query on ``content`` (and it is on)."""
        caps = self._rt.index.capabilities
        return (
            self._rt.settings.text_candidates > 0
            and caps is not None
            and caps.text_fields
            and self._rt.index.layout.text
        )

    def args(self, query: str, flt: MemoryFilter, fields: Sequence[str]) -> list[list[str]]:
        """The FT.SEARCH argument lists (none when the query has no words or the engine no TEXT)."""
        if not self.available():
            return []
        words = query_words(query)
        if not words:
            return []
        caps = self._rt.index.capabilities
        assert caps is not None
        check = self._rt.index.needs_check(flt)
        # The vector gives a text-only hit its exact distance; a decoding client cannot read it.
        vector = () if self._rt.backend.decodes else (VECTOR_FIELD,)
        want = tuple(dict.fromkeys([*fields, *vector, *(CHECK_FIELDS if check else ())]))
        return text_search_args(
            self._rt.keys.index,
            words,
            flt,
            layout=self._rt.index.layout,
            per_word=caps.engine != "redisearch",
            return_fields=want,
            limit=self._rt.settings.text_candidates,
        )

    def candidates(
        self,
        replies: Sequence[Any],
        *,
        query: str,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        flt: MemoryFilter,
        known: set[str],
        reranker: Reranker | None,
        farthest: float,
    ) -> list[tuple[MemoryItem, float]]:
        """``(item, cosine distance)`` of the text hits not in ``known`` (the KNN's ids).

        A hit whose vector cannot be read (a client with ``decode_responses=True``) is
        placed at ``farthest``, the KNN's last distance: it can only rise by its words.
        """
        rt = self._rt
        check = rt.index.needs_check(flt)
        now_ms = time.time() * 1000
        norm = float(np.linalg.norm(vector)) or 1.0
        found: dict[str, tuple[MemoryItem, float]] = {}
        expired: list[str] = []
        for reply in replies:
            for hit in parse_search_reply(reply).hits:
                mid = rt.keys.memory_id_of(hit.key)
                f = hit.fields
                if mid in known or mid in found or "content" not in f:
                    continue
                if check and not item_matches(f, flt):
                    continue
                expires = as_text(f.get("expires_at"))
                if expires and to_float(expires) <= now_ms:
                    expired.append(mid)
                    continue
                raw = f.get(VECTOR_FIELD)
                distance = farthest
                if isinstance(raw, bytes | bytearray) and raw:
                    stored = decode_vector(bytes(raw))
                    if stored.shape != vector.shape:
                        continue
                    cos = float(np.dot(vector, stored)) / (norm * (float(np.linalg.norm(stored)) or 1.0))
                    distance = max(0.0, min(2.0, 1.0 - cos))
                item = item_from_fields(mid, f, fact_source=rt.settings.fact_source)
                found[mid] = (item, distance)
        if expired:
            self._docs.drop_expired(expired)
        pairs = sorted(found.values(), key=lambda p: p[0].id)
        limit = self._rt.settings.text_candidates
        if len(replies) > 1 and len(pairs) > limit:
            # One query per word (valkey-search): keep the union's lexically best.
            ranker = reranker if isinstance(reranker, HybridRanker) else _DEFAULT_RANKER
            scores = ranker.lexical_scores(query, [item.content for item, _ in pairs])
            order = sorted(range(len(pairs)), key=lambda i: (-scores[i], pairs[i][0].id))
            pairs = [pairs[i] for i in order[:limit]]
        return pairs
