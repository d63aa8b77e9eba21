"""The full-text half of a hybrid recall: candidates the KNN misses, found by the query's words.

A small sentence model places the memory that answers a question only a little
nearer than the memories around it, so the KNN top 50 often misses it. The engine's
full-text index finds memories that share the question's rarer words wherever they sit
in the vector space, and with them the candidates hold the answer far more often (the
figures: the benchmark pages, "Retrieval quality research", from
``bench/results/quality-research.md``). They join the KNN candidates and everything is
re-ranked together (``core.ranking``).

Per engine (``core.text_query.text_search_args``): RediSearch answers one BM25-scored query
for all the words; valkey-search >= 1.2 one query per word, whose union is ranked here
by the same lexical score the re-ranker uses, keeping the best ``text_candidates``. There a
question sends at most ``max_words`` (``core.frequencies.PER_WORD_MAX_WORDS``) queries, for
its rarest words (``core.frequencies.rarest``): each query costs a round of the engine's
work and a reply to parse, and a common word's query returns an unranked sample of its
matches that rarely holds the answer (the measurements: ``bench/bench_text_words.py``);
engines without TEXT fields (valkey-search 1.0), or an index whose ``content`` is not
one, keep the KNN-only path. A text-only candidate's cosine distance is computed here
from its stored vector, so every candidate is scored on the same scale.

The text queries are an extra, so they never hold a recall up or bring it down: they
are sent beside the KNN (not in its round trip, whose reply would wait for theirs),
each with ``TIMEOUT`` (``Settings.text_timeout_ms``), and the client waits for them a
little longer than that (``core.text_query.client_bound_seconds``). When they time out,
fail with a server error, or come back partial, the recall ranks the KNN candidates
alone: counted (``agent_memory_recall_degraded_total{reason}``), shown in ``explain``
(``ScoreParts.degraded``) and logged at warning the first time per reason. A KNN
failure still raises. Why: on valkey-search 1.2.1's cluster a text query stalled for
the engine's 50 s default timeout while reinforcement's writes were being indexed
(``/work/notes`` of the textbudget branch; ``bench/bench_1m.py``), and failed the recall.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ..core.codec import to_float
from ..core.frequencies import PER_WORD_MAX_WORDS, DocumentFrequencies, TextPlan, word_count_args
from ..core.models import MemoryHit, MemoryItem, item_from_fields, ranking_item
from ..core.query import VECTOR_FIELD, MemoryFilter, filter_search_args
from ..core.ranking import HybridRanker, Reranker, query_words
from ..core.replies import parse_search_reply
from ..core.text_query import (
    DegradedReason,
    client_bound_seconds,
    is_timeout_message,
    reply_warning,
    text_search_args,
)
from ..core.where import check_fields, result_matches
from ..errors import ServerError, StoreClosedError, StoreConnectionError, StoreTimeoutError
from .documents import Documents
from .runtime import Runtime

__all__ = ["TextCandidates", "TextRequest"]

_DEFAULT_RANKER = HybridRanker()

T = TypeVar("T")

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TextRequest:
    """The searches one recall sends to the full-text index: ``queries`` text queries, then probes."""

    plan: TextPlan
    searches: list[list[str]]
    queries: int


class TextCandidates:
    """Builds the text queries of a hybrid recall and turns their replies into candidates."""

    def __init__(self, rt: Runtime, docs: Documents) -> None:
        self._rt = rt
        self._docs = docs
        self._frequencies = DocumentFrequencies()
        # At most this many words searched on an engine that answers one query per word (None: no cap).
        self.max_words: int | None = PER_WORD_MAX_WORDS
        self._warned: set[str] = set()  # the degraded reasons logged at warning already

    def available(self) -> bool:
        """Whether the engine and the index in use can answer a full-text query on ``content`` (and it is on)."""
        caps = self._rt.index.capabilities
        return (
            self._rt.settings.text_candidates > 0
            and caps is not None
            and caps.text_fields
            and self._rt.index.layout.text
        )

    def request(
        self, query: str, flt: MemoryFilter, fields: Sequence[str], *, pool: int
    ) -> TextRequest | None:
        """The text queries of a recall whose KNN returns ``pool``, and the count probes sent with them.

        None when nothing is to be sent: the engine has no TEXT, or the query no words.
        Words most memories hold are left out, and an index the KNN reads whole gets no
        text query (``core.frequencies``).
        """
        if not self.available():
            return None
        words = query_words(query)
        if not words:
            return None
        caps = self._rt.index.capabilities
        assert caps is not None
        per_word = caps.engine != "redisearch"
        plan = self._frequencies.plan(
            words, time.monotonic(), pool=pool, max_words=self.max_words if per_word else None
        )
        index = self._rt.index.name
        layout = self._rt.index.layout
        searches: list[list[str]] = []
        if plan.words:
            check = self._rt.index.needs_check(flt)
            # The vector gives a text-only hit its exact distance; a decoding client cannot read it.
            vector = () if self._rt.backend.decodes else (VECTOR_FIELD,)
            want = tuple(dict.fromkeys([*fields, *vector, *check_fields(flt, check)]))
            searches = text_search_args(
                index,
                plan.words,
                flt,
                layout=layout,
                per_word=per_word,
                return_fields=want,
                limit=self._rt.settings.text_candidates,
                timeout_ms=self._rt.settings.text_timeout_ms,
            )
        queries = len(searches)
        searches += [word_count_args(index, w) for w in plan.probe_words]
        if plan.probe_total:
            searches.append(filter_search_args(index, MemoryFilter(), layout=layout, limit=0))
        if not searches:
            return None
        return TextRequest(plan, searches, queries)

    async def alongside(
        self, request: TextRequest | None, knn: Awaitable[T]
    ) -> tuple[T, list[Any], str | None]:
        """``knn``'s result, with the replies of ``request``'s text queries sent beside it, and why
        the recall is degraded (None: it is not; the replies are then complete).

        The text queries run concurrently with ``knn`` under their budget; when they time
        out or fail, the replies are empty (the recall ranks the KNN candidates alone).
        ``knn`` failing raises (the text queries are then cancelled).
        """
        if request is None:
            return await knn, [], None
        task = asyncio.ensure_future(self._send(request))
        try:
            result = await knn
        except BaseException:
            task.cancel()
            raise
        replies, reason, detail = await task
        texts = self.learn(request, replies) if reason is None else []
        if reason is None:
            warnings = [w for w in map(reply_warning, texts) if w and is_timeout_message(w)]
            if warnings:
                reason, detail = "partial", "; ".join(warnings)
        if reason is not None:
            self._degraded(reason, detail)
        return result, texts, reason

    async def _send(self, request: TextRequest) -> tuple[list[Any], DegradedReason | None, str]:
        """The text queries' replies, or why there are none (a timeout, a server's error)."""
        bound = client_bound_seconds(self._rt.settings.text_timeout_ms)
        send = self._rt.backend.pipeline("recall", [], searches=request.searches)
        try:
            return await asyncio.wait_for(send, bound), None, ""
        except TimeoutError:  # the client's bound (StoreTimeoutError: the socket's)
            return [], "timeout", f"no answer within {bound:.2f} s"
        except StoreClosedError:
            raise
        except (ServerError, StoreConnectionError) as exc:
            message = str(exc.details.get("server_message") or exc)
            timed_out = isinstance(exc, StoreTimeoutError) or is_timeout_message(message)
            return [], "timeout" if timed_out else "error", message

    def _degraded(self, reason: DegradedReason, detail: str) -> None:
        self._rt.metrics.observe_recall_degraded(reason)
        level = logging.DEBUG if reason in self._warned else logging.WARNING
        self._warned.add(reason)
        log.log(
            level,
            "recall ranked its KNN candidates alone: the full-text queries %s (%s); counted in "
            "recall_degraded_total{reason=%r}, later ones are logged at debug",
            {"timeout": "timed out", "error": "failed", "partial": "came back partial"}[reason],
            detail[:300],
            reason,
        )

    @staticmethod
    def mark(hits: list[MemoryHit], reason: str | None) -> list[MemoryHit]:
        """``hits`` with ``explain.degraded`` set to ``reason`` (hits without ``explain`` unchanged)."""
        if reason is None:
            return hits
        return [
            h
            if h.explain is None
            else dataclasses.replace(h, explain=dataclasses.replace(h.explain, degraded=reason))
            for h in hits
        ]

    def learn(self, request: TextRequest, replies: Sequence[Any]) -> list[Any]:
        """Keep the counts the probes brought; the replies of the text queries."""
        probes = replies[request.queries :]
        counts = [parse_search_reply(r, nocontent=True).total for r in probes]
        words = request.plan.probe_words
        total = counts[len(words)] if request.plan.probe_total and len(counts) > len(words) else None
        self._frequencies.learn(zip(words, counts, strict=False), total, time.monotonic())
        return list(replies[: request.queries])

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
        slim: bool = False,
        vectors: dict[str, bytes] | None = None,
    ) -> list[tuple[MemoryItem, float]]:
        """``(item, cosine distance)`` of the text hits not in ``known`` (the KNN's ids).

        A hit whose vector cannot be read (a client with ``decode_responses=True``) is
        placed at ``farthest``, the KNN's last distance: it can only rise by its words.
        ``slim``: the items carry only what ranking reads (``ranking_item``).
        ``vectors``: filled with the hits' stored vectors (same-slot supersession reads them).
        """
        rt = self._rt
        check = rt.index.needs_check(flt)
        now_ms = time.time() * 1000
        width = 4 * vector.shape[0]  # FLOAT32 bytes of a vector of the query's dimension
        kept: dict[str, dict[str, Any]] = {}
        blobs: dict[str, bytes] = {}
        expired: list[str] = []
        for reply in replies:
            for hit in parse_search_reply(reply).hits:
                mid = rt.keys.memory_id_of(hit.key)
                f = hit.fields
                if mid in known or mid in kept or "content" not in f:
                    continue
                if not result_matches(f, flt, check):
                    continue
                expires = to_float(f.get("expires_at"))
                if expires and expires <= now_ms:
                    expired.append(mid)
                    continue
                raw = f.get(VECTOR_FIELD)
                if isinstance(raw, bytes | bytearray) and raw:
                    if len(raw) != width:
                        continue  # another model's vector: no distance on the query's scale
                    blobs[mid] = bytes(raw)
                kept[mid] = f
        if vectors is not None:
            vectors.update(blobs)
        # Every readable vector's cosine distance in one product.
        distance_of: dict[str, float] = {}
        if blobs:
            stored = np.frombuffer(b"".join(blobs.values()), dtype="<f4").reshape(len(blobs), -1)
            norms = np.linalg.norm(stored, axis=1)
            norms[norms == 0] = 1.0
            cos = (stored @ vector.astype(np.float32)) / (norms * (float(np.linalg.norm(vector)) or 1.0))
            distance_of = dict(zip(blobs, np.clip(1.0 - cos, 0.0, 2.0).tolist(), strict=True))
        found: dict[str, tuple[MemoryItem, float]] = {}
        pending = self._docs.reinforcement.pending  # lagging accesses, built in (``Reinforcement.overlay``)
        for mid, f in kept.items():
            seen = pending.get(mid)
            item = (
                ranking_item(mid, f, seen=seen)
                if slim
                else item_from_fields(mid, f, fact_source=rt.settings.fact_source, seen=seen)
            )
            found[mid] = (item, distance_of.get(mid, farthest))
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
