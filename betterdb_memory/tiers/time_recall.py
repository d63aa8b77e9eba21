"""Time in a recall, with I/O: the window's filters, the present order, the prototypes' cache.

The rules are pure (``core.time_recall``, ``core.supersession``); this part holds what
they need from the store: the index layout (which time fields the index in use has),
the stored vectors of the few candidates the rule compares (read after the search, only
when two candidates share a leading name: the search itself returns no vectors, 1.5 KB
each at 384 dimensions), and the prototype sentences of same-slot supersession,
embedded with the store's own embedder the first time a recall meets two candidates
that pass the rule's cheap half (same leading name, close statements), then kept in
the process (not in Valkey: another embedder in another process has another space).
A store whose recalls never meet two versions of a statement never embeds them.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core import history_mark
from ..core.codec import encode_vector
from ..core.learned_rank import is_turn
from ..core.models import MemoryHit, MemoryItem
from ..core.query import VECTOR_FIELD, MemoryFilter, knn_search_args
from ..core.replies import SearchHit, parse_search_reply
from ..core.scoring import Weights
from ..core.slot_model import for_model
from ..core.supersession import (
    Candidate,
    Prototypes,
    focus_scores,
    kind_pairs,
    near_pairs,
    prototype_texts,
    vector_needs,
)
from ..core.time_recall import (
    TimePlan,
    boost_window,
    history_clause,
    inside_clause,
    inside_of,
    main_k,
    supersede,
    window_k,
    with_window,
)
from ..core.where import check_fields, names_declared
from .history import HISTORY_ITEM_FIELDS, History
from .runtime import Runtime
from .scope_scan import ScanPlan, ScopeScan

__all__ = ["Needs", "TimeRecall", "WindowQueries"]

log = logging.getLogger(__name__)

Pair = tuple[MemoryItem, float]


@dataclass(frozen=True, slots=True)
class Needs:
    """What ``TimeRecall.reorders`` read from a recall's candidates, for ``order``.

    ``candidates``: how many (-1: not read, a window's recall); ``ids``: those whose
    vectors same-slot supersession reads (``vector_needs``).
    """

    candidates: int
    ids: frozenset[str]


@dataclass(slots=True)
class WindowQueries:
    """An exact window's KNN queries of one recall, sent in its round trip, and what they found.

    ``searches``: FT.SEARCH arguments, the main index's queries (one: events and states)
    first, then the history index's (past versions) when ``history`` is its filter.
    ``knn_k``: hits the recall's own KNN asks for beside them (``main_k``: the recall's
    ``k``). ``reads``: commands sent first in the round trip (the history mark, on a single
    server); ``deferred``: the history index's query and filter, not sent because the
    mark last read said the window holds no past version, sent by ``TimeRecall.settle``
    if the mark read now says it may (``start``: the window's start it is checked
    against). ``inside``: the ids of the main index's memories they returned; ``past``:
    the past versions, read whole, as (item, distance).
    ``plans``: per search, its scan's plan when it was sent as a scan (``ScopeScan.plan``:
    on valkey-search, a window over a scope known small, or a window never seen); ``found``:
    those scans' hits, ranked by ``settle`` (nearest first, as the KNN's).
    """

    searches: list[list[str | bytes]]
    knn_k: int
    history: MemoryFilter | None = None
    reads: list[tuple[str, ...]] = field(default_factory=list)
    deferred: tuple[list[str | bytes], MemoryFilter] | None = None
    inside: set[str] = field(default_factory=set)
    past: list[tuple[MemoryItem, float]] = field(default_factory=list)
    plans: list[ScanPlan | None] = field(default_factory=list)
    found: dict[int, list[SearchHit]] = field(default_factory=dict)
    deferred_plan: ScanPlan | None = None  # the deferred history query's scan plan, if a scan
    start: int | None = None  # the window's start (epoch ms; None: open), which ``deferred`` waits on

    def merge(
        self, hits: list[SearchHit], replies: list[Any], past: History, ids: Callable[[str], str]
    ) -> list[SearchHit]:
        """``hits`` plus the window queries' hits it lacks (their replies, ``replies[1:]``, popped).

        ``ids``: a key's memory id (``SessionKeys.memory_id_of``), what ``inside`` holds.
        """
        known = {h.key for h in hits}
        for i in range(len(self.searches) - (self.history is not None)):
            reply = replies.pop(1)
            for h in self.found[i] if i in self.found else parse_search_reply(reply).hits:
                self.inside.add(ids(h.key))
                if h.key not in known:
                    known.add(h.key)
                    hits.append(h)
        self._past(replies, past)
        return hits

    def merge_pairs(
        self, out: list[Pair], replies: list[Any], read: Callable[[Any], list[Pair]], past: History
    ) -> None:
        """``merge`` for a recall whose replies are read straight to pairs (``PairReader.reply``), in place.

        Only when no query of the round trip was a scan (``found`` empty) and no exact
        check applies: the window's pairs ``out`` lacks are appended, and the history
        index's reply read as ``merge`` reads it. Parsing each row once, by position,
        instead of into a ``SearchHit`` and back: a windowed recall's client-side cost
        (bench/results/temporal.md, section E).
        """
        known = {item.id for item, _ in out}
        for _ in range(len(self.searches) - (self.history is not None)):
            for pair in read(replies.pop(1)):
                mid = pair[0].id
                self.inside.add(mid)
                if mid not in known:
                    known.add(mid)
                    out.append(pair)
        self._past(replies, past)

    def _past(self, replies: list[Any], past: History) -> None:
        """The history index's reply (next in ``replies``, popped) read to ``past``, when it was asked."""
        if self.history is not None:
            at, reply = len(self.searches) - 1, replies.pop(1)
            found = self.found.get(at)
            self.past = (
                past.knn_hits(reply, self.history) if found is None else past.pairs(found, self.history)
            )


class TimeRecall:
    """The time-aware steps of one store's recalls (see the module docstring)."""

    def __init__(self, rt: Runtime, scan: ScopeScan | None = None) -> None:
        self._rt = rt
        self._scan = scan  # the recall's: a window over a small scope is read whole, not walked
        self._prototypes: Prototypes | None = None
        self._prototypes_failed = False
        # What the store's meta said of its past versions at the last windowed recall
        # (core.history_mark; None: not read yet): whether the next one asks the history
        # index in its own round trip. Read again by every windowed recall.
        self._held: history_mark.HistoryState | None = None

    def window(
        self,
        plan: TimePlan,
        flt: MemoryFilter,
        vector: npt.NDArray[np.float32],
        *,
        k: int,
        pool: int,
        fields: Sequence[str],
    ) -> WindowQueries | None:
        """An exact window's queries (None without one), ``window_k(k, pool)`` hits each.

        The recall's own query is not narrowed: the window's queries add what lies inside
        it (ranked first, ``order``), so a window the question meant otherwise ("in June",
        asked of a conversation dated years ago) never empties a recall. Both carry the
        recall's filter (scope, tags, ``where``, ``since`` / ``until``). The history
        index's query is left out with ``as_of`` (the recall already asks that index for
        the versions valid then; ``window_first`` tells which overlap the window) and
        with a ``where`` on declared fields, which that index does not hold.
        """
        w = plan.window
        if w is None or not plan.filters:
            return None
        n = window_k(k, pool)
        own = main_k(pool, k)
        blob = encode_vector(vector)
        index = self._rt.index
        fields = tuple(dict.fromkeys([*fields, *check_fields(flt, index.needs_check(flt))]))
        inside = dataclasses.replace(flt, clauses=(*flt.clauses, inside_clause(w, index.layout)))
        iplan = self._inside_plan(vector, inside, n, fields)
        searches: list[list[str | bytes]] = [
            iplan.args
            if iplan is not None
            else knn_search_args(index.name, blob, k=n, flt=inside, layout=index.layout, return_fields=fields)
        ]
        plans: list[ScanPlan | None] = [iplan if iplan is not None and iplan.scan else None]
        if flt.as_of is not None or (flt.where is not None and names_declared(flt.where)):
            return WindowQueries(searches, own, plans=plans)
        past = dataclasses.replace(flt, history=True, clauses=(*flt.clauses, history_clause(w)))
        wanted = (*HISTORY_ITEM_FIELDS, *(flt.where.fields if flt.where is not None else ()))
        hplan = self._history_plan(vector, past, n, tuple(dict.fromkeys(wanted)))
        history = hplan.args if hplan is not None else knn_search_args(
            index.history.name, blob, k=n, flt=past, layout=index.history.layout,
            return_fields=tuple(dict.fromkeys(wanted)),
        )  # fmt: skip
        hscan = hplan if hplan is not None and hplan.scan else None
        # A cluster sends a pipeline's commands before its searches, not beside them: no mark read there.
        if self._rt.backend.cluster:
            return WindowQueries([*searches, history], own, history=past, plans=[*plans, hscan])
        reads = [history_mark.read(self._rt.keys.meta)]  # every time: ``settle`` checks what it says now
        if self._held is not None and history_mark.needed(self._held, w.start_ms):  # as last read: asked now
            return WindowQueries([*searches, history], own, history=past, reads=reads, plans=[*plans, hscan])
        return WindowQueries(
            searches, own, reads=reads, deferred=(history, past), plans=plans, deferred_plan=hscan, start=w.start_ms
        )  # fmt: skip

    def _history_plan(
        self, vector: npt.NDArray[np.float32], past: MemoryFilter, n: int, fields: Sequence[str]
    ) -> ScanPlan | None:
        """The window's past-versions query as the scope scan plans it (``ScopeScan.history_plan``)."""
        return None if self._scan is None else self._scan.history_plan(vector, past, n, fields)

    def _inside_plan(
        self, vector: npt.NDArray[np.float32], inside: MemoryFilter, n: int, fields: Sequence[str]
    ) -> ScanPlan | None:
        """The window's events-and-states query as the scope scan plans it (None: the KNN as built here).

        On valkey-search a filtered KNN walks the HNSW graph, visiting about ``n /
        selectivity`` nodes: a window ("last week") is a small part of its scope, so its
        query cost more than the recall's own. Planned like the recall's (``scope_of``: a
        scope known worth scanning is scanned under any window), without counts of its
        own. Not on an index another library made (its matches need the exact check).
        """
        if self._scan is None or self._rt.index.needs_check(inside):
            return None
        return self._scan.plan(vector, inside, n, fields, counts=False)

    async def settle(self, window: WindowQueries | None, replies: list[Any]) -> list[Any]:
        """The round trip's ``replies`` without ``window.reads``'; the history index asked now if needed.

        The mark read now says the window may hold a past version (``history_mark.needed``:
        a version retired after the window's start, a store an older version wrote) and the
        query was left out by the last one: it is sent in one more round trip, its reply put
        where ``merge`` expects it; later windowed recalls decide by this reading.
        A window's query sent as a scan is ranked here (``ScopeScan.hits``: its nearest
        hits, or its KNN in one more round trip when the scan held more than it read).
        """
        if window is None:
            return replies
        if window.reads:
            self._held, replies = history_mark.state(replies[0]), replies[len(window.reads) :]
            if window.deferred is not None and history_mark.needed(self._held, window.start):
                args, window.history = window.deferred
                search = functools.partial(self._rt.backend.search, "recall", args)
                reply = await self._rt.index.with_index("recall", search)
                at = 1 + len(window.searches)  # after the recall's own query and the main index's
                window.searches.append(args)
                window.plans.append(window.deferred_plan)
                replies = [*replies[:at], reply, *replies[at:]]
        if self._scan is not None:
            for i, plan in enumerate(window.plans):
                if plan is not None:  # a scan's reply: its nearest hits (a KNN after it, if it held more)
                    window.found[i] = await self._scan.hits(plan, [replies[1 + i]])
        return replies

    def reorders(
        self, plan: TimePlan, candidates: Sequence[tuple[MemoryItem, float]], query: str | None
    ) -> Needs | None:
        """Whether ``order`` can re-order the ranked ``candidates`` (None: no, rank cuts them to ``k``).

        With a window, always. For a question about the present, only when same-slot
        supersession can apply to them (``vector_needs``, from their texts): most recalls
        (conversation turns, memories with no two versions of a name) then rank and build
        ``k`` hits, not one per candidate. The answer (``Needs``) goes to ``order``.
        """
        if plan.window is not None:  # exact: ``first`` orders it in ``rank``
            return None if plan.filters else Needs(-1, frozenset())
        if not plan.present or len(candidates) < 2 or not self._implicit() or not self._reads_vectors():
            return None
        items = [item for item, _ in candidates if not is_turn(item.content)]
        need = vector_needs([it.content for it in items], [it.valid_from for it in items], query)
        if not need:
            return None
        return Needs(len(candidates), frozenset(items[i].id for i in need))

    @staticmethod
    def first(plan: TimePlan, window: WindowQueries | None) -> Callable[[MemoryItem], bool] | None:
        """What an exact window ranks first (``ranking.rank``'s ``first``: ``inside_of``), None without one."""
        if not plan.filters or plan.window is None:
            return None
        return inside_of(plan.window, window.inside if window is not None else set())

    def _implicit(self) -> bool:
        """Whether same-slot supersession runs (``MemoryStore(implicit_updates=...)``, on by default)."""
        return self._rt.settings.implicit_updates

    def _reads_vectors(self) -> bool:
        """Whether the rule can read stored vectors (a decoding client cannot)."""
        return bool(self._rt.embedder.dimensions) and not self._rt.backend.decodes

    async def order(
        self,
        hits: Sequence[MemoryHit],
        plan: TimePlan,
        *,
        k: int,
        weights: Weights,
        vectors: Mapping[str, bytes],
        query: str | None = None,
        needs: Needs | None = None,
    ) -> list[MemoryHit]:
        """The ranked ``hits`` (all candidates, best first) re-ordered for ``plan``, cut to ``k``.

        A vague window's boost, or same-slot supersession for a question about the present
        (an exact window is ordered by ``rank`` itself: ``first``).
        ``query``: the question (same-slot supersession reads the names it asks about).
        ``needs``: what ``reorders`` found in the candidates.
        """
        out = list(hits)
        if plan.boosts and plan.window is not None:
            out = boost_window(out, plan.window, weights)
        elif plan.present and len(out) > 1 and self._implicit():
            out = await self._present(out, vectors, query or "", needs)
        return with_window(out[:k], plan)

    async def _present(
        self, hits: list[MemoryHit], vectors: Mapping[str, bytes], query: str = "", needs: Needs | None = None
    ) -> list[MemoryHit]:
        """Same-slot supersession over the hits, reading only the vectors the rule needs.

        ``vectors``: the stored vectors the recall already holds (its text-only
        candidates'); the rest of those the rule reads (``vector_needs``: candidates
        that share a leading name with another, those the question names) are read in
        one round trip, and only when two candidates can be versions of one statement.
        """
        if not self._reads_vectors():
            return hits
        width = self._rt.embedder.dimensions * 4
        # Conversation turns ("Name: ...") are not statements of a slot: two turns of one
        # speaker on one topic are not versions of one fact (measured: LoCoMo, -11 points).
        idx = [i for i, h in enumerate(hits) if not is_turn(h.item.content)]
        if len(idx) < 2:
            return hits
        if needs is not None and needs.candidates == len(hits):
            # The hits are the candidates ``reorders`` read (re-ordered): the same ones.
            need = [r for r, i in enumerate(idx) if hits[i].item.id in needs.ids]
        else:
            need = vector_needs(
                [hits[i].item.content for i in idx], [hits[i].item.valid_from for i in idx], query
            )
        if not need:
            return hits
        idx = [idx[r] for r in need]
        blobs = await self._vectors([hits[i].item.id for i in idx], vectors)
        # A memory gone since the search (or stored with another model's vector) is left out.
        idx = [i for i in idx if len(blobs.get(hits[i].item.id, b"")) == width]
        cands = [
            Candidate(
                hits[i].item.id,
                hits[i].item.content,
                np.frombuffer(blobs[hits[i].item.id], dtype="<f4"),
                hits[i].item.valid_from,
                hits[i].score,
                1.0 - hits[i].distance,
            )
            for i in idx
        ]
        pairs = near_pairs(cands)
        if not pairs:
            return hits
        prototypes = await self._load_prototypes()
        if prototypes is None:
            return hits
        embedder = self._rt.embedder
        model = for_model(embedder.model_id, embedder.dimensions)
        kept = kind_pairs(cands, pairs, prototypes, model, question=query)
        scores = [h.score for h in hits]
        for i, score in zip(idx, focus_scores(cands, query, kept), strict=True):
            scores[i] = score
        return supersede(hits, [(idx[o], idx[n]) for o, n in kept], scores)

    async def _vectors(self, ids: Sequence[str], known: Mapping[str, bytes]) -> dict[str, bytes]:
        """The stored vectors of ``ids``: from ``known``, the others read (one ``HGET`` each, pipelined)."""
        out = {mid: known[mid] for mid in ids if mid in known}
        missing = [mid for mid in ids if mid not in known]
        if missing:
            doc = self._rt.keys.doc
            replies = await self._rt.backend.pipeline(
                "recall", [("HGET", doc(mid), VECTOR_FIELD) for mid in missing]
            )
            out.update(
                (mid, bytes(raw))
                for mid, raw in zip(missing, replies, strict=True)
                if isinstance(raw, (bytes, bytearray))
            )
        return out

    async def _load_prototypes(self) -> Prototypes | None:
        """The prototype vectors, embedded once with the store's embedder; None if that failed once.

        A failure (an embedder down) leaves recall as it would be without the rule and is
        not retried: the rule fails safe, it never costs a recall.
        """
        if self._prototypes is not None or self._prototypes_failed:
            return self._prototypes
        texts, kinds = prototype_texts()
        try:
            vectors: Any = await self._rt.embed(texts)
        except Exception as exc:  # the rule is an improvement, never a reason to fail a recall
            log.warning("same-slot supersession is off: embedding its prototypes failed: %s", exc)
            self._prototypes_failed = True
            return None
        self._prototypes = Prototypes.of(np.asarray(vectors, dtype=np.float32), kinds)
        return self._prototypes
