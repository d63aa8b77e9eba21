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

The words' document counts that choose the words (``core.frequencies``) are taken off the
recall's path: a query for one word with no filter brings its word's count in its reply,
and the other counts a recall needs are sent after it, by one background task at a time
(``_Refresher``), in batches. A count costs the engine about what a search of its word
costs; in the recall's round trip they were most of valkey-search's unscoped recall on
real text (``bench/bench_text_side.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from ..core.codec import as_text, to_float
from ..core.frequencies import (
    PER_WORD_MAX_WORDS,
    SCORED_POSTINGS_BUDGET,
    DocumentFrequencies,
    RecountPace,
    TextPlan,
    word_count_args,
)
from ..core.models import MemoryHit, MemoryItem, item_from_fields, ranking_item
from ..core.query import VECTOR_FIELD, MemoryFilter, build_filter, filter_search_args
from ..core.ranking import HybridRanker, Reranker, query_words
from ..core.replies import parse_search_reply
from ..core.text_query import (
    DegradedReason,
    ScopesReadWhole,
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
    #: The words whose counts the text queries' replies carry (one per query, in order).
    counted: tuple[str, ...] = ()


def reply_total(reply: Any) -> int | None:
    """The match count an FT.SEARCH reply starts with (RESP2 list, RESP3 map), None if it has none."""
    value = reply.get("total_results", reply.get(b"total_results")) if isinstance(reply, dict) else None
    if isinstance(reply, list | tuple) and reply:
        value = reply[0]
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


class _Refresher:
    """Counts words (and the whole index) after the recalls that want them, one task at a time.

    Words wanted while a batch is out wait for the next one (at most ``_QUEUE`` of them;
    more are left for a later recall to ask again). A batch that fails drops the queue:
    the counts stay as they were, and the next recall that wants one asks again. Recounts
    of counts already learned go at ``RecountPace``; one it does not allow now is dropped
    the same way.
    """

    _BATCH = 16
    _QUEUE = 256

    def __init__(self, rt: Runtime, frequencies: DocumentFrequencies) -> None:
        self._rt = rt
        self._frequencies = frequencies
        self._pace = RecountPace()
        self._words: dict[str, None] = {}  # wanted, in order
        self._total = False
        self._running = False
        self._task: asyncio.Task[None] | None = None

    async def settled(self) -> None:
        """Return once no count is being taken (tests: the counts a recall asked for are in)."""
        while self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    def want(self, words: Sequence[str], *, total: bool) -> None:
        for word in words:
            if len(self._words) >= self._QUEUE:
                break
            self._words.setdefault(word)
        self._total = self._total or total
        if self._running:
            return
        self._running = True
        try:
            self._task = self._rt.supervisor.spawn(self._run(), name="word_counts")
        except StoreClosedError:
            self._running = False

    async def _run(self) -> None:
        index, layout = self._rt.index.name, self._rt.index.layout
        try:
            while self._words or self._total:
                words = list(self._words)[: self._BATCH]
                for word in words:
                    del self._words[word]
                now, freq = time.monotonic(), self._frequencies
                words = [w for w in words if (n := freq.last(w)) is None or self._pace.allow(n, now)]
                total = self._total and ((n := freq.last(None)) is None or self._pace.allow(n, now))
                self._total = False
                if not words and not total:
                    continue
                searches = [word_count_args(index, w) for w in words]
                if total:
                    searches.append(filter_search_args(index, MemoryFilter(), layout=layout, limit=0))
                try:
                    replies = await self._rt.backend.pipeline("recall", [], searches=searches)
                except (ServerError, StoreConnectionError, StoreClosedError) as exc:
                    log.debug("word counts not retaken (%s): the last ones stay in use", exc)
                    self._words.clear()
                    return
                counts = [reply_total(r) for r in replies]
                learned = {w: n for w, n in zip(words, counts, strict=False) if n is not None}
                whole = counts[len(words)] if total and len(counts) > len(words) else None
                self._frequencies.learn(learned, whole, time.monotonic())
        finally:
            self._running = False


class TextCandidates:
    """Builds the text queries of a hybrid recall and turns their replies into candidates."""

    def __init__(self, rt: Runtime, docs: Documents) -> None:
        self._rt = rt
        self._docs = docs
        self._frequencies = DocumentFrequencies()
        self._refresher = _Refresher(rt, self._frequencies)
        # At most this many words searched on an engine that answers one query per word (None: no cap).
        self.max_words: int | None = PER_WORD_MAX_WORDS
        # The postings budget of RediSearch's one scored query (``core.frequencies``).
        self.scored_budget: int = SCORED_POSTINGS_BUDGET
        self._whole = ScopesReadWhole()  # RediSearch: filters whose last KNN came back short
        self._warned: set[str] = set()  # the degraded reasons logged at warning already

    async def settled(self) -> None:
        """Return once the word counts asked for in the background are in (tests)."""
        await self._refresher.settled()

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
        index = self._rt.index.name
        layout = self._rt.index.layout
        if not per_word and self._whole.read_whole(build_filter(flt, layout), pool):
            return None  # the KNN reads every memory of the scope: a text query could add none
        plan = self._frequencies.plan(
            words,
            time.monotonic(),
            pool=pool,
            max_words=self.max_words if per_word else None,
            postings_budget=None if per_word else self.scored_budget,
        )
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
        if plan.probe_total:
            searches.append(filter_search_args(index, MemoryFilter(), layout=layout, limit=0))
        if not searches and not plan.probe_words and not plan.refresh_total:
            return None
        # A query for one word with no filter answers that word's count: no probe for it.
        single = not build_filter(flt, layout) and (per_word or len(plan.words) == 1)
        return TextRequest(plan, searches, queries, counted=plan.words[:queries] if single else ())

    def knn_read(self, flt: MemoryFilter, found: int, k: int) -> None:
        """Note that a recall's KNN for ``k`` under ``flt`` found ``found`` memories (``ScopesReadWhole``).

        RediSearch only: valkey-search's filtered KNN may stop short of ``k`` on a large scope.
        Filters checked or windowed in the client (``where=``, time) are not noted.
        """
        caps = self._rt.index.capabilities
        if caps is None or caps.engine != "redisearch" or flt.where is not None or flt.has_time:
            return
        if not self._rt.index.needs_check(flt):
            self._whole.note(build_filter(flt, self._rt.index.layout), found, k)

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
        if not request.searches:  # only counts to retake: after the recall's KNN
            result = await knn
            self._refresh(request, ())
            return result, [], None
        task = asyncio.ensure_future(self._send(request))
        try:
            result = await knn
        except BaseException:
            task.cancel()
            raise
        replies, reason, detail = await task
        texts = list(replies[: request.queries]) if reason is None else []
        if reason is None:
            warnings = [w for w in map(reply_warning, texts) if w and is_timeout_message(w)]
            if warnings:
                reason, detail = "partial", "; ".join(warnings)
        if reason is not None:
            self._degraded(reason, detail)
        else:  # a partial answer's totals are partial too: nothing learned from it
            self.learn(request, replies)
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
        """Keep the counts the replies bring (the index's; one word's), then retake the other
        counts the recall's plan asked for, in the background; the replies of the text queries."""
        now = time.monotonic()
        total = None
        if request.plan.probe_total and len(replies) > request.queries:
            total = reply_total(replies[request.queries])
        learned = {
            w: n for w, r in zip(request.counted, replies, strict=False) if (n := reply_total(r)) is not None
        }
        self._frequencies.learn(learned, total, now)
        self._refresh(request, learned)
        return list(replies[: request.queries])

    def _refresh(self, request: TextRequest, learned: Collection[str]) -> None:
        """Count, off the recall's path, the words (and the index) its plan found unknown or stale."""
        plan = request.plan
        words = [w for w in plan.probe_words if w not in learned]
        if words or plan.refresh_total:
            self._refresher.want(words, total=plan.refresh_total)

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
                if isinstance(raw, bytes | bytearray) and raw and len(raw) != width:
                    continue  # another model's vector: no distance on the query's scale
                kept[mid] = f
        if expired:
            self._docs.drop_expired(expired)
        ids = sorted(kept)
        limit = self._rt.settings.text_candidates
        if len(replies) > 1 and len(ids) > limit:
            # One query per word (valkey-search): keep the union's lexically best, chosen by
            # their text alone before any item is built or distance computed (a third of the
            # union, on LoCoMo's unscoped questions, was built only to be dropped).
            ranker = reranker if isinstance(reranker, HybridRanker) else _DEFAULT_RANKER
            scores = ranker.lexical_scores(query, [as_text(kept[m]["content"]) for m in ids])
            order = sorted(range(len(ids)), key=lambda i: (-scores[i], ids[i]))
            ids = [ids[i] for i in order[:limit]]
        blobs: dict[str, bytes] = {}
        for mid in ids:
            raw = kept[mid].get(VECTOR_FIELD)
            if isinstance(raw, bytes | bytearray) and raw:
                blobs[mid] = bytes(raw)
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
        pending = self._docs.reinforcement.pending  # lagging accesses, built in (``Reinforcement.overlay``)
        pairs: list[tuple[MemoryItem, float]] = []
        for mid in ids:
            f, seen = kept[mid], pending.get(mid)
            item = (
                ranking_item(mid, f, seen=seen)
                if slim
                else item_from_fields(mid, f, fact_source=rt.settings.fact_source, seen=seen)
            )
            pairs.append((item, distance_of.get(mid, farthest)))
        return pairs
