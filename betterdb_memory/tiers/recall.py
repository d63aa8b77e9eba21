"""Recall: one KNN query, client-side composite scoring, reinforcement of the hits.

Every query is a KNN query (bare ``*`` or hybrid with a scope filter), so it runs on valkey-search 1.0,
except a small scope on valkey-search >= 1.1, read whole and ranked here (``tiers.scope_scan``); hits are re-sorted client-side
because RediSearch returns KNN hits in document-id order without SORTBY. The
``threshold`` is the reference's: a cosine-distance ceiling on the KNN distance. The
hits' reinforcement is one ``scripts_reinforce.ACCESS`` call (one per hit, pipelined, on
a cluster); a re-ranked recall reads its winners with it in the same round trip.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core.codec import encode_vector, validate_vector
from ..core.knn_rows import PairReader
from ..core.models import MemoryHit, MemoryItem, Sensitivity
from ..core.query import ITEM_FIELDS, MemoryFilter, item_matches, knn_search_args
from ..core.ranking import Gate, rank
from ..core.replies import SearchHit, parse_search_reply
from ..core.requests import DEFAULT_K, RecallRequest, TimeInput, recall_request
from ..core.scoring import Weights
from ..core.time_recall import TimePlan, search_text, whole_items, with_window
from ..core.tunables import ConfigSnapshot
from ..core.validation import check_content
from ..core.where import check_fields, result_matches
from ..observability.tracing import add_attributes
from .documents import Documents
from .history import History
from .hybrid import TextCandidates
from .runtime import Runtime
from .scope_scan import ScanPlan, ScopeScan
from .time_recall import TimeRecall, WindowQueries

__all__ = ["DEFAULT_K", "Recall"]

_MAX_KNN = 10_000  # the most hits one KNN query may ask for (valkey-search's default maximum k)
# What ranking reads: the text (re-ranking), the composite score's inputs, the expiry, the scope
# (``LearnedRanker``'s neighbours are the memories next to a candidate in its thread), and
# recency's anchor (``core.validity.last_seen_ms``; ``valid_from`` is not in the index schema yet).
_RANKING_FIELDS: tuple[str, ...] = (
    "content", "importance", "created_at", "last_accessed_at", "expires_at", "threadId", "agentId", "namespace",
    "valid_from", "access_count",
)  # fmt: skip
_DISTINCT = (ITEM_FIELDS, _RANKING_FIELDS)  # field lists without a repeated name (``_search``)
_HIT, _EMPTY = (
    {"recalls": 1, "recall_hits": 1},
    {"recalls": 1, "recall_empty": 1},
)  # a recall's stats (never mutated)
_DENSE = TimePlan(present=False)  # a recall without a re-ranker: the reference's order, no time rule

log = logging.getLogger(__name__)


class Recall:
    """``recall``, ``recall_by_vector``, ``search_candidates`` and reinforcement of hits."""

    def __init__(self, rt: Runtime, docs: Documents) -> None:
        self._rt = rt
        self._docs = docs
        self._text = TextCandidates(rt, docs)
        self._scan = ScopeScan(rt)
        self._time = TimeRecall(rt, self._scan)  # a window's queries are planned by the scan too
        self._history = History(rt)
        self._weights: tuple[ConfigSnapshot | None, Weights] = (None, Weights())

    def effective_threshold(self, threshold: float | None = None) -> float:
        """The cosine-distance ceiling a recall uses: the argument, else the live config's."""
        return self._threshold(threshold, self._rt.config())

    def _threshold(self, threshold: float | None, cfg: ConfigSnapshot) -> float:
        if threshold is not None:
            return threshold
        return self._rt.settings.default_threshold if cfg.threshold is None else cfg.threshold

    async def recall(
        self,
        query: str,
        *,
        k: int | None = None,
        threshold: float | None = None,
        tags: Sequence[str] | None = None,
        weights: Weights | Mapping[str, float] | None = None,
        reinforce: bool | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        exclude_sensitivity: Sequence[Sensitivity] | None = None,
        explain: bool = False,
        as_of: TimeInput | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
        tz: str | None = None,
    ) -> list[MemoryHit]:
        """Recall up to ``k`` memories by meaning, best composite score first.

        A time expression in the query ("last week") keeps the recall to its window; without
        one, the newest statement of a slot ranks first (``core.time_recall``).

        Args:
            query: text to embed and search by.
            k: hits wanted (1..1000, default 8).
            threshold: cosine-distance ceiling (0..2; a hit needs distance <= it);
                default: the store's ``default_threshold`` or the live config's.
            tags: only memories carrying ALL of these tags.
            weights: per-call composite weights (``RecallWeights``).
            reinforce: bump ``last_accessed_at`` / ``access_count`` of returned hits
                (default True).
            thread_id / agent_id / namespace: scope filter (None = any).
            exclude_sensitivity: leave out memories of these sensitivity classes.
            explain: attach the score's components (and ``time_window``, ``superseded_by``).
            as_of: what was valid at that instant (``valid_from <= as_of < valid_until``),
                superseded versions included when they were current then (they are not
                reinforced). Default: no time filter (future-dated memories included).
                A time expression in the query counts from it.
            since / until: only memories whose ``valid_from`` (their ``created_at`` when
                written without one) falls in ``[since, until)``.
                Times: a ``datetime`` (naive is UTC), epoch ms, or ISO 8601 text.
            where: a filter on metadata and built-in fields, ANDed with the scope and
                applied inside the KNN query (pre-filtered: the ``k`` nearest matching
                memories), e.g. ``{"priority": {"$gte": 2}, "source": {"$ne": "web"}}``.
                Operators (MongoDB's meaning): ``$eq $ne $gt $gte $lt $lte $in $nin
                $exists``, ``$and $or $not``; ``$ne`` / ``$nin`` match memories without
                the field, a comparison on a missing field is false. Fields: ``thread_id
                agent_id namespace tags source importance created_at valid_from`` and the
                store's ``metadata_fields``; the full table is in ``list``'s docstring.
                A bad filter is a ``ValidationError`` before any I/O.
            tz: the IANA time zone the query's days are counted in (default UTC); an
                unknown one is a ``ValidationError`` before any I/O.
        """
        request = recall_request(
            query=check_content(query, name="query"), k=k, threshold=threshold, tags=tags, weights=weights,
            reinforce=reinforce, thread_id=thread_id, agent_id=agent_id, namespace=namespace,
            exclude_sensitivity=exclude_sensitivity, explain=explain, as_of=as_of, since=since, until=until,
            tz=tz, where=self._rt.parse_where(where),
        )  # fmt: skip
        if request.where is not None:  # compiled for the index in use (no frame for the usual recall)
            request = await self._with_where(request)
        started = time.perf_counter()
        vector = (await self._rt.embed([search_text(request.query or "", request.plan)]))[0]
        return await self._recall_vector(vector, request, embed_seconds=time.perf_counter() - started)

    async def recall_by_vector(
        self,
        vector: Sequence[float],
        *,
        k: int | None = None,
        threshold: float | None = None,
        tags: Sequence[str] | None = None,
        weights: Weights | Mapping[str, float] | None = None,
        reinforce: bool | None = None,
        thread_id: str | None = None,
        agent_id: str | None = None,
        namespace: str | None = None,
        exclude_sensitivity: Sequence[Sensitivity] | None = None,
        explain: bool = False,
        query: str | None = None,
        as_of: TimeInput | None = None,
        since: TimeInput | None = None,
        until: TimeInput | None = None,
        where: Mapping[str, Any] | None = None,
        tz: str | None = None,
    ) -> list[MemoryHit]:
        """``recall`` with a precomputed query vector (same options).

        ``query``: the text the vector was made from; given, the store's ``reranker``
        re-orders the candidates as in ``recall`` (without it: the dense order), and a
        time expression in it limits the recall to its window as in ``recall``.
        ``as_of`` / ``since`` / ``until`` / ``tz``: as in ``recall``.
        """
        # Every argument is checked before any I/O; the vector's length too, unless it
        # is still to be learned from an embed_fn's first answer.
        request = recall_request(
            query=None if query is None else check_content(query, name="query"), k=k, threshold=threshold,
            tags=tags, weights=weights, reinforce=reinforce, thread_id=thread_id, agent_id=agent_id,
            namespace=namespace, exclude_sensitivity=exclude_sensitivity, explain=explain,
            as_of=as_of, since=since, until=until, tz=tz, where=self._rt.parse_where(where),
        )  # fmt: skip
        if self._rt.embedder.dimensions:
            vec = validate_vector(vector, dimensions=self._rt.embedder.dimensions)
            await self._rt.index.ensure_ready()
        else:
            await self._rt.index.ensure_ready()
            vec = validate_vector(vector, dimensions=self._rt.embedder.dimensions)
        if request.where is not None:  # compiled for the index in use (no frame for the usual recall)
            request = await self._with_where(request)
        return await self._recall_vector(vec, request, embed_seconds=0.0)

    async def _with_where(self, request: RecallRequest) -> RecallRequest:
        """The request with its parsed ``where`` (not None) compiled for the index in use (a KNN query)."""
        await self._rt.index.ensure_ready()
        flt = self._rt.with_where(request.flt, request.where, operation="recall", filter_only=False)
        return dataclasses.replace(request, flt=flt)

    async def search_candidates(
        self,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        flt: MemoryFilter,
        k: int,
        *,
        return_fields: Sequence[str] = ITEM_FIELDS,
    ) -> list[tuple[MemoryItem, float]]:
        """One KNN query: (item, cosine distance) pairs, nearest first, exactly in ``flt``.

        With a reduced ``return_fields`` the items carry only those fields (the rest
        at their defaults): used to rank many candidates cheaply before fetching the
        few that are returned.
        """
        await self._rt.index.ensure_ready()
        pairs, _ = await self._search(vector, flt, k, return_fields, [])
        return pairs

    async def _search(
        self,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        flt: MemoryFilter,
        k: int,
        return_fields: Sequence[str],
        extra: Sequence[Sequence[Any]],
        *,
        slim: bool = False,
        also: WindowQueries | None = None,
    ) -> tuple[list[tuple[MemoryItem, float]], list[Any]]:
        """The KNN candidates (nearest first), and the replies of ``extra`` searches sent with it.

        ``slim``: ``return_fields`` are the ranking fields, and the items ranking items.
        """
        check = self._rt.index.needs_check(flt)
        own = check_fields(flt, check)  # none, and a field list known distinct: taken as it is
        fields = return_fields if not own and return_fields in _DISTINCT else (*dict.fromkeys([*return_fields, *own]),)  # fmt: skip
        plan = self._scan.plan(vector, flt, k, fields)  # a small scope's exact scan, else the KNN
        args, backend = plan.args, self._rt.backend
        reads = also.reads if also is not None else []  # a window's history mark (tiers.time_recall)
        if also is not None:  # a window's queries: the main index's, the history index's
            extra = [*also.searches, *extra]
        past = self._history.knn_plan(vector, flt, k, fields, self._scan) if flt.as_of is not None else None
        if past is not None:  # the history index's half, in the same round trip
            extra = [*extra, past.args]
        extra = [*extra, *plan.probe]  # last: ``ScopeScan.hits`` pops its reply
        replies: list[Any]
        if extra:
            replies = await self._rt.index.with_index(
                "recall", lambda: backend.pipeline("recall", reads, searches=[args, *extra])
            )
            replies = await self._time.settle(also, replies)
        else:
            replies = [await self._rt.index.with_index("recall", lambda: backend.search("recall", args))]
        hits = None  # the KNN's reply read as it came, unless a scan, a probe, a scanned window or a check intervene
        direct = also is not None and not (plan.scan or plan.probe or check or also.found)
        if (plan.scan or plan.probe or also is not None or check) and not direct:
            hits = await self._hits(plan, replies, vector, flt, k, fields, check=check, also=also)
        read = PairReader(
            prefix=self._rt.keys.doc_prefix, now_ms=time.time() * 1000, slim=slim,
            pending=self._docs.reinforcement.pending,  # lagging accesses: ``overlay`` then finds them current
            fact_source=self._rt.settings.fact_source,
            keep=(lambda f: result_matches(f, flt, check)) if check or flt.where is not None else None,
        )  # fmt: skip
        out = read.reply(replies[0]) if hits is None else read.hits(hits)
        if direct and also is not None:  # a window's replies read as the KNN's, by position
            also.merge_pairs(out, replies, read.reply, self._history)
        expired = read.expired
        if expired:
            self._docs.drop_expired(expired)
        if past is not None:  # its KNN's hits, or its scan's nearest (``ScopeScan.history_plan``)
            out += self._history.pairs(await self._scan.hits(past, [replies.pop()]), flt)
        out += also.past if also is not None else []  # a window's past versions (read whole)
        out.sort(key=lambda pair: pair[1])  # RediSearch returns KNN hits in doc-id order
        return out, replies[1:]

    async def _hits(
        self,
        plan: ScanPlan,
        replies: list[Any],
        vector: np.ndarray[Any, np.dtype[np.float32]],
        flt: MemoryFilter,
        k: int,
        fields: Sequence[str],
        *,
        check: bool,
        also: WindowQueries | None,
    ) -> list[SearchHit]:
        """The main query's hits as ``ScopeScan.hits`` reads them, a window's merged in, widened for ``check``."""
        hits = await self._scan.hits(plan, replies, keep=(lambda f: item_matches(f, flt)) if check else None)
        if also is not None:  # a window's events and states: the hits the first did not find
            hits = also.merge(hits, replies, self._history, self._rt.keys.memory_id_of)
        if check and len(hits) >= k and k < _MAX_KNN:
            # The engine's KNN filled k with memories the exact check may drop (case variants on
            # an index another library created): widen the KNN until k pass or it holds all.
            passing = sum(1 for h in hits if item_matches(h.fields, flt))
            while passing < k and len(hits) >= k and k < _MAX_KNN:
                k = min(_MAX_KNN, k * 4)
                args = knn_search_args(
                    self._rt.index.name, encode_vector(vector), k=k, flt=flt, layout=self._rt.index.layout,
                    return_fields=fields,
                )  # fmt: skip
                search = functools.partial(self._rt.backend.search, "recall", args)
                hits = parse_search_reply(await self._rt.index.with_index("recall", search)).hits
                passing = sum(1 for h in hits if item_matches(h.fields, flt))
        return hits

    async def _recall_vector(
        self, vector: np.ndarray[Any, np.dtype[np.float32]], request: RecallRequest, *, embed_seconds: float
    ) -> list[MemoryHit]:
        k, cfg = request.k, self._rt.config()  # one snapshot of the live config per recall
        threshold = self._threshold(request.threshold, cfg)
        weights = request.weights
        if weights is None:
            if cfg is not self._weights[0]:  # the configured weights, built once per snapshot
                self._weights = (
                    cfg,
                    Weights(cfg.weight_similarity, cfg.weight_recency, cfg.weight_importance),
                )
            weights = self._weights[1]
        started = time.perf_counter()
        with self._rt.obs.span("recall") as span:
            hits, search_seconds, near_miss = await self._recall_scored(
                vector, request.flt, k, threshold, weights, reinforce=request.reinforce,
                explain=request.explain, query=request.query, plan=request.plan, half_life=cfg.half_life_seconds,
            )  # fmt: skip
            if span.is_recording():  # what the span reports, built only for a span that records
                key = self._rt.keys.doc(hits[0].item.id) if hits else None
                self._rt.obs.mark_recall(span, len(hits), k=k, matched_key=key)
                add_attributes(span, {"gen_ai.memory.k": k, "gen_ai.memory.hits": len(hits)})
        self._rt.metrics.observe_recall(
            hits=len(hits),
            near_miss=near_miss,
            embed_seconds=embed_seconds,
            search_seconds=search_seconds,
            total_seconds=embed_seconds + time.perf_counter() - started,
        )
        self._rt.obs.count(_HIT if hits else _EMPTY)
        if request.plan.mode is not None:
            self._rt.metrics.observe_time_window_recall(request.plan.mode)
        return hits

    async def _recall_scored(
        self,
        vector: np.ndarray[Any, np.dtype[np.float32]],
        flt: MemoryFilter,
        k: int,
        threshold: float,
        weights: Weights,
        *,
        reinforce: bool,
        explain: bool,
        plan: TimePlan,
        query: str | None,
        half_life: float,
    ) -> tuple[list[MemoryHit], float, bool]:
        reranker = self._rt.settings.reranker if query is not None else None
        plan = plan if reranker is not None else _DENSE  # drop-in: the reference's order
        n = k * self._rt.settings.candidate_factor
        if reranker is not None:  # lexical evidence can only lift what KNN returned
            n = max(n, self._rt.settings.rerank_candidates)
        # Ranking many candidates needs only text and scoring fields: the full items of the top k come after.
        slim = n > k and flt.as_of is None  # superseded versions are read whole (no FETCH by id)
        fields = _RANKING_FIELDS if slim else ITEM_FIELDS
        vectors: dict[str, bytes] = {}  # the text-only candidates' (same-slot supersession reads them)
        started = time.perf_counter()
        await self._rt.ready("recall")
        pool = min(n, 10_000)

        # With the KNN: a window's queries (events, states, past versions); beside it: text (tiers.hybrid).
        # Sent again after a subject repair (rt.read).
        async def first_trip() -> tuple[WindowQueries | None, int, Any]:
            also = self._time.window(plan, flt, vector, k=k, pool=pool, fields=fields)
            own = pool if also is None else also.knn_k  # beside a window's query: the rest of the pool
            text = (
                self._text.request(query, flt, fields, pool=own) if reranker is not None and query else None
            )
            knn = self._search(vector, flt, own, fields, [], slim=slim, also=also)
            if text is None:  # ``alongside``'s answer without a text side, one frame fewer
                return also, own, (await knn, [], None)
            return also, own, await self._text.alongside(text, knn)

        also, own, ((candidates, _), text_replies, degraded) = await self._rt.read("recall", first_trip)
        self._text.knn_read(flt, len(candidates), own)  # a scope it read whole: no text query next time
        knn_distances = [d for _, d in candidates]
        if text_replies and query is not None:
            candidates = candidates + self._text.candidates(
                text_replies,
                query=query,
                vector=vector,
                flt=flt,
                known={item.id for item, _ in candidates},
                reranker=reranker,
                farthest=max(knn_distances, default=2.0),
                slim=slim,
                vectors=vectors,
            )
        search_seconds = time.perf_counter() - started
        now = time.time()
        # Re-ranked: the threshold gates the whole recall (core.ranking.Gate); dense: each hit.
        gate = Gate(threshold, self._rt.settings.margin) if reranker is not None else None
        candidates = self._docs.reinforcement.overlay(candidates)  # this store's accesses not yet flushed
        needs = self._time.reorders(plan, candidates, query)  # None: ``rank`` cuts to k, nothing re-orders
        hits = rank(
            candidates, k=k if needs is None else len(candidates), threshold=threshold, weights=weights,
            half_life_seconds=half_life, now=now, reranker=reranker, query=query, explain=explain, gate=gate,
            knn_distances=knn_distances, first=self._time.first(plan, also),  # an exact window's inside first
        )  # fmt: skip
        if needs is not None:
            hits = await self._time.order(
                hits, plan, k=k, weights=weights, vectors=vectors, query=query, needs=needs
            )
        elif plan.window is not None:  # explain's time_window
            hits = with_window(hits, plan)
        hits = self._text.mark(hits, degraded)  # explain says when the text side was left out
        # Read with the hits, in the same round trip: their reinforcement (sync mode).
        merged = reinforce and slim and bool(hits) and self._rt.settings.reinforce_mode == "sync"
        if slim and hits:
            full = await self._docs.fetch(
                [h.item.id for h in hits if h.item.valid_until is None],  # past versions came whole
                reinforce=(now, half_life) if merged else None,
            )
            hits = whole_items(hits, full)
        near_miss = False
        if not hits and knn_distances:
            nearest = min(knn_distances)
            if gate is not None:
                near_miss = self._rt.obs.near_miss(nearest, threshold, checked=gate.near_miss(knn_distances))
            else:
                near_miss = self._rt.obs.near_miss(nearest, threshold)
        current = [h.item.id for h in hits if h.item.valid_until is None]  # never a superseded version
        if reinforce and current and not merged:
            if self._rt.settings.reinforce_mode == "background":
                self._rt.spawn(self.reinforce(current, now, half_life))
            else:
                await self.reinforce(current, now, half_life)
        return hits, search_seconds, near_miss

    async def reinforce(self, ids: Sequence[str], now: float, half_life: float) -> None:
        """Count an access of ``ids`` in one round trip (``Documents.reinforce``; the lag: ``tiers.reinforce``)."""
        try:
            await self._docs.reinforce(ids, now, half_life)
        except Exception as exc:  # reinforcement must never break the read path
            log.warning("reinforcement of %d hits failed: %s", len(ids), exc)
            self._rt.metrics.observe_background_failure("reinforce")
