"""Hybrid re-ranking: lexical (BM25-style) evidence fused with dense similarity, client-side.

The KNN query returns a few dozen candidates with their cosine distances; this
module re-orders them using the words the query and each candidate share. It runs
in the client on the candidates' ``content`` only, so it works on every engine,
valkey-search 1.0 (no TEXT fields) included. Pure functions: no I/O, no clock, no
randomness, and the output does not depend on the order of the input.

Why it is needed: a small sentence model scores a question against the turn that
answers it only a little above the turns around it (on LoCoMo, all-MiniLM-L6-v2
ranks an evidence turn first for a minority of questions: the benchmark pages), while a rare word the two
share (a name, "pottery", "Sweden") is strong evidence. ``bench/quality.py``
measures the gain; ``bench/results/quality.md`` holds the numbers.

How a candidate is scored (``HybridRanker.fuse``):

1. **Terms.** ``core.text.tokenize`` (NFKC, casefold, Unicode ``\\w`` words, one
   token per CJK / Thai character), minus tokens with no letter or digit, minus
   ``stopwords`` (English by default), with English inflections folded on ASCII
   words (``core.text.fold_suffix``, Porter's steps 1 and 5a: ``paintings`` /
   ``painted`` / ``painting`` -> ``paint``; other scripts are left alone). Query
   terms are a set: repeating a word or reordering the query changes nothing. A
   query made of stop words only has no terms, and then the dense order is returned
   unchanged.
2. **IDF from the candidate set.** BM25 needs document frequencies, and a
   re-ranker sees only the candidates. The IDF is computed over them, with the
   usual +0.5 smoothing and ``ln(1 + ...)`` so it is never negative (Lucene's
   form): ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``. This measures what a
   term is worth *for telling these candidates apart*, which is the question a
   re-ranker answers: a speaker's name present in 30 of 50 candidates weighs
   little, a word present in 2 weighs a lot, and a language's function words
   missing from the stop list get a low weight by themselves. On LoCoMo it ranks
   as well as document frequencies over the whole conversation (the bench checked
   both), so no per-store statistics are kept.
3. **Lexical score in 0..1.** Per term, BM25's saturating term-frequency factor
   (``k1 = 0.5``; no document-length normalisation by default, ``b = 0``: memories
   are short, and a long one is not a weaker match), divided by its ceiling ``k1 + 1``; summed
   with IDF weights and divided by the query's total IDF. So ``lexical`` is the
   IDF-weighted share of the query's terms the candidate contains (0 when it
   shares none).
4. **Fusion.** ``fused = 1 - (1 - dense) * exp(-alpha * lexical)`` where
   ``dense = 1 - distance / 2`` is the store's similarity. Equivalently
   ``-ln(1 - fused) = -ln(1 - dense) + alpha * lexical``: a linear fusion in a
   space where the dense scores, crowded just below 1, are spread out. It keeps
   the store's scale: ``fused`` is in 0..1, equals ``dense`` when no query term
   matches, and only rises with lexical evidence, so the threshold calibrated on
   dense similarities never drops a hit the dense ranking would keep, and the
   composite score (recency, importance) applies to ``fused`` as it did to
   ``dense``. ``alpha = 4``, with ``k1 = 0.5`` and ``b = 0``: chosen on LoCoMo
   conversations 1-5 and held on 6-10 (``bench/results/quality-research.md``).
5. **Order.** Fused similarity descending, then dense similarity descending, then
   memory id: never input position.

When the store re-ranks (``rank(..., gate=...)``), the threshold gates the query as a
whole instead of cutting each hit (``Gate``): a question in the first person sits as
far from the third-person fact that answers it as another conversation's nearest
memory does, so a per-hit ceiling either drops right answers or lets off-topic
questions through; how much the nearest memory stands out from the scope's other
neighbours tells them apart.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .arguments import check_number
from .models import MemoryHit, MemoryItem, new_hit
from .scoring import ScoreParts, Weights
from .text import fold_suffix, tokenize

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_B",
    "DEFAULT_K1",
    "ENGLISH_STOPWORDS",
    "FusedCandidate",
    "Gate",
    "HybridRanker",
    "Reranker",
    "query_words",
    "rank",
]

DEFAULT_ALPHA = 4.0
DEFAULT_K1 = 0.5
DEFAULT_B = 0.0

# English function words (the usual IR lists: Lucene/NLTK), plus the pieces that
# ``tokenize`` makes of contractions ("don't" -> "don", "t"). Content words that
# those lists carry ("won", "need", "us" as in the US) are left out: they can answer a question.
_ENGLISH_STOPWORDS = """
    a about above after again against all also am an and any are aren as at be because been before
    being below between both but by can cannot could couldn d did didn do does doesn doing don down
    during each either else ever few for from further had hadn has hasn have haven having he her here
    hers herself him himself his how i if in into is isn it its itself just ll m ma me might mightn
    more most mustn my myself neither no nor not now o of off on once only or other ought our ours
    ourselves out over own re s same shan she should shouldn so some such t than that the their
    theirs them themselves then there these they this those through to too under until up upon
    ve very was wasn we were weren what when where whether which while who whom whose why will with
    would wouldn y yet you your yours yourself yourselves
"""
ENGLISH_STOPWORDS: frozenset[str] = frozenset(_ENGLISH_STOPWORDS.split())


@runtime_checkable
class Reranker(Protocol):
    """Re-orders KNN candidates for a text query (the store's re-ranking seam).

    ``candidates`` are ``(item, cosine_distance)`` pairs; the result holds the same
    items as ``(item, similarity)`` pairs, best first, ``similarity`` on the store's
    0..1 scale (the threshold and the composite score are applied to it).
    """

    def rerank(
        self, query: str, candidates: Sequence[tuple[MemoryItem, float]]
    ) -> list[tuple[MemoryItem, float]]: ...


@dataclass(frozen=True, slots=True)
class FusedCandidate:
    """One re-ranked candidate with the parts of its score."""

    item: MemoryItem
    distance: float  # cosine distance from the KNN query (0..2)
    dense: float  # 1 - distance / 2
    lexical: float  # IDF-weighted share of the query's terms matched (0..1)
    similarity: float  # fused (0..1, >= dense)


# Memories share their words: fold each word once (the folding is the costly part of ``_terms``).
_fold = functools.lru_cache(maxsize=1 << 16)(fold_suffix)


@functools.lru_cache(maxsize=8192)
def _terms(text: str, stopwords: frozenset[str], fold: bool) -> tuple[str, ...]:
    """Index terms of a text; cached because the same memories come back query after query.

    A recall over a large store still tokenises a few dozen candidates it has not seen
    lately, so the common case is kept short: an ASCII text's tokens are ``[a-z0-9_]+``,
    which hold a letter or digit unless they are all underscores.
    """
    tokens = tokenize(text)
    if text.isascii():
        kept = [t for t in tokens if t not in stopwords and t.strip("_")]
    else:
        kept = [t for t in tokens if t not in stopwords and any(ch.isalnum() for ch in t)]
    return tuple(map(_fold, kept)) if fold else tuple(kept)


@functools.lru_cache(maxsize=8192)
def _term_counts(text: str, stopwords: frozenset[str], fold: bool) -> tuple[dict[str, int], int]:
    """Each term's count in a text, and the number of terms (cached like ``_terms``; do not mutate).

    Candidates' texts go through this cache only (``_terms`` keeps the queries'): one
    entry per text, not two.
    """
    terms = _terms.__wrapped__(text, stopwords, fold)
    counts: dict[str, int] = {}
    for t in terms:
        counts[t] = counts.get(t, 0) + 1
    return counts, len(terms)


def _check_number(name: str, value: object, *, low: float, high: float | None = None) -> float:
    return check_number(value, name, minimum=low, maximum=high, setting=True)


class HybridRanker:
    """BM25-style lexical evidence fused with dense similarity (see the module docstring).

    Args:
        alpha: weight of the lexical score; 0 returns the dense order and scores.
        k1: BM25 term-frequency saturation.
        b: BM25 document-length normalisation (0 = none, 1 = full).
        stopwords: words that are never terms (casefolded; matched after tokenising).
        fold_suffixes: apply ``fold_suffix`` to ASCII words.

    Raises:
        ConfigurationError: a parameter is out of range.
    """

    def __init__(
        self,
        *,
        alpha: float = DEFAULT_ALPHA,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        stopwords: Iterable[str] = ENGLISH_STOPWORDS,
        fold_suffixes: bool = True,
    ) -> None:
        self.alpha = _check_number("alpha", alpha, low=0.0)
        self.k1 = _check_number("k1", k1, low=0.0)
        self.b = _check_number("b", b, low=0.0, high=1.0)
        self.stopwords = frozenset(w.casefold() for w in stopwords)
        self.fold_suffixes = bool(fold_suffixes)

    def __repr__(self) -> str:
        return (
            f"HybridRanker(alpha={self.alpha}, k1={self.k1}, b={self.b}, "
            f"stopwords={len(self.stopwords)} words, fold_suffixes={self.fold_suffixes})"
        )

    def terms(self, text: str) -> tuple[str, ...]:
        """The terms ``text`` contributes (in order, repeats kept): what matching sees."""
        return _terms(text, self.stopwords, self.fold_suffixes)

    def lexical_scores(self, query: str, documents: Sequence[str]) -> list[float]:
        """Lexical score (0..1) of each document for ``query``, IDF from ``documents`` themselves."""
        query_terms = sorted(set(self.terms(query)))  # sorted: float sums never depend on word order
        if not query_terms or not documents:
            return [0.0] * len(documents)
        stopwords, fold = self.stopwords, self.fold_suffixes
        counted = [_term_counts(d, stopwords, fold) for d in documents]
        doc_terms, lengths = zip(*counted, strict=True)
        n = len(doc_terms)
        avg_length = sum(lengths) / n  # integer sum: exact, whatever the order
        k1, b, ceiling = self.k1, self.b, self.k1 + 1.0
        if b == 0.0:  # the default: k1 * (1.0 - 0.0 + 0.0 * x) is k1 exactly (x = length / avg is finite)
            norms = [k1] * n
        else:
            norms = [k1 * (1.0 - b + b * length / avg_length) if avg_length > 0 else k1 for length in lengths]
        # Term by term over the documents (a query has a few terms, a recall a hundred
        # candidates): each document's sum still adds its terms in sorted order.
        acc = [0.0] * n
        total_idf = 0.0
        for t in query_terms:
            tfs = [c.get(t, 0) for c in doc_terms]
            df = n - tfs.count(0)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            total_idf += idf
            if df:
                for i, tf in enumerate(tfs):
                    if tf:
                        acc[i] += idf * (tf * ceiling / (tf + norms[i])) / ceiling
        return [min(1.0, a / total_idf) for a in acc]

    def _fused(
        self, query: str, candidates: Sequence[tuple[MemoryItem, float]]
    ) -> list[tuple[float, float, float, MemoryItem, float]]:
        """``(fused, dense, lexical, item, distance)`` of each candidate, best first."""
        lexical = self.lexical_scores(query, [item.content for item, _ in candidates])
        alpha, exp = self.alpha, math.exp
        # Sorted on plain tuples (-fused, -dense, id, position): the order of the key
        # (-fused, -dense, id) with a stable sort, compared in C instead of a key function.
        keyed: list[tuple[float, float, str, int]] = []
        for n, ((item, distance), lex) in enumerate(zip(candidates, lexical, strict=True)):
            # min(1.0, max(0.0, 1.0 - distance / 2.0)) (scoring.similarity_from_distance), NaN included
            dense = 1.0 - distance / 2.0
            dense = dense if dense > 0.0 else 0.0
            dense = dense if dense < 1.0 else 1.0
            similarity = 1.0 - (1.0 - dense) * exp(-alpha * lex)
            fused = similarity if similarity > dense else dense  # max(dense, similarity)
            fused = fused if fused < 1.0 else 1.0  # min(1.0, ...)
            keyed.append((-fused, -dense, item.id, n))
        keyed.sort()
        return [(-negf, -negd, lexical[n], candidates[n][0], candidates[n][1]) for negf, negd, _, n in keyed]

    def fuse(self, query: str, candidates: Sequence[tuple[MemoryItem, float]]) -> list[FusedCandidate]:
        """Score and order ``(item, cosine_distance)`` candidates; best first, with score parts."""
        return [
            FusedCandidate(item, distance, dense, lex, fused)
            for fused, dense, lex, item, distance in self._fused(query, candidates)
        ]

    def rerank(
        self, query: str, candidates: Sequence[tuple[MemoryItem, float]]
    ) -> list[tuple[MemoryItem, float]]:
        """``(item, fused_similarity)`` pairs, best first (the ``Reranker`` protocol)."""
        return [(item, fused) for fused, _, _, item, _ in self._fused(query, candidates)]


def query_words(query: str, stopwords: Iterable[str] = ENGLISH_STOPWORDS) -> tuple[str, ...]:
    """The words of ``query`` a full-text search looks for: terms minus stop words, unfolded, sorted.

    Unfolded because the engine stems them itself; sorted and unique so the query
    sent does not depend on word order or repeats.
    """
    stop = stopwords if isinstance(stopwords, frozenset) else frozenset(w.casefold() for w in stopwords)
    return tuple(sorted(set(_terms(query, stop, False))))


@dataclass(frozen=True, slots=True)
class Gate:
    """Whether a re-ranked recall returns anything: the scope holds an answer, or not.

    It opens when the nearest KNN candidate is within ``ceiling`` (the threshold, a
    cosine distance), or when it stands out from the median of the KNN candidates by
    at least ``margin`` (None: the ceiling alone). Open, the top hits by fused score
    come back with no per-hit distance cut. Constants per embedder in
    ``bench/results/quality-research.md``.
    """

    ceiling: float
    margin: float | None = None

    @staticmethod
    def _spread(distances: Sequence[float]) -> tuple[float, float]:
        ordered = sorted(distances)
        n = len(ordered)
        median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2.0
        return ordered[0], median

    def opens(self, distances: Sequence[float]) -> bool:
        """Whether KNN candidates at these distances let the recall answer."""
        if not distances:
            return False
        nearest, median = self._spread(distances)
        return nearest <= self.ceiling or (self.margin is not None and median - nearest >= self.margin)

    def near_miss(self, distances: Sequence[float]) -> bool:
        """A closed gate that almost opened (the threshold, not the data, likely emptied the recall)."""
        if not distances or self.opens(distances):
            return False
        nearest, median = self._spread(distances)
        return nearest <= 1.1 * self.ceiling or (
            self.margin is not None and median - nearest >= 0.9 * self.margin
        )


_FIRST = operator.itemgetter(0)  # a scored entry's composite score
_Scored = tuple[float, float, float, MemoryItem, float]  # (score, similarity, recency, item, distance)


def rank(
    candidates: Sequence[tuple[MemoryItem, float]],
    *,
    k: int,
    threshold: float,
    weights: Weights,
    half_life_seconds: float,
    now: float,
    reranker: Reranker | None = None,
    query: str | None = None,
    explain: bool = False,
    gate: Gate | None = None,
    knn_distances: Sequence[float] | None = None,
    first: Callable[[MemoryItem], bool] | None = None,
) -> list[MemoryHit]:
    """The top ``k`` hits of ``(item, cosine distance)`` candidates, best composite score first.

    Without a ``gate`` the threshold is a ceiling on each hit's distance (the
    reference's meaning), applied before re-ranking: lexical evidence re-orders, it
    never admits. With a ``gate`` (re-ranked recall) the KNN distances
    (``knn_distances``, default: every candidate's) decide once whether anything comes
    back, and then every candidate competes on its fused score. A re-ranked hit is
    scored on its fused similarity (clamped to 0..1; a reranker may drop candidates,
    never invent them); every hit keeps its ``distance`` and ``similarity = 1 -
    distance / 2``. ``first``: those it holds go ahead, as ``time_recall.window_first`` lifts an
    exact window's inside (``inside_of``), and only ``k`` hits are built. Pure: ``now`` is passed in.
    """
    if gate is not None:
        ds = [d for _, d in candidates] if knn_distances is None else list(knn_distances)
        admitted = list(candidates) if gate.opens(ds) else []
    else:
        admitted = [(item, d) for item, d in candidates if d <= threshold]
    # (fused similarity or None, item, distance) per admitted candidate, in the ties' order.
    entries: list[tuple[float | None, MemoryItem, float]]
    if reranker is not None and query is not None and admitted:
        entries = _reranked(reranker, query, admitted)
    else:
        entries = [(None, item, d) for item, d in admitted]
    # ``scoring.composite`` for up to a hundred candidates a recall, ScoreParts for the hits returned only:
    # ``scoring.weighted``, ``scoring.recency`` and ``validity.last_seen_ms`` inlined (the same
    # operations in the same order, so the same floats).
    ws, wr, wi = weights.similarity, weights.recency, weights.importance
    scored: list[_Scored] = []
    append = scored.append
    for similarity, item, distance in entries:
        d = distance if similarity is None else 2.0 * (1.0 - similarity)
        # min(1.0, max(0.0, 1.0 - d / 2.0)) (scoring.similarity_from_distance), NaN included
        sim = 1.0 - d / 2.0
        sim = sim if sim > 0.0 else 0.0
        sim = sim if sim < 1.0 else 1.0
        # validity.last_seen_ms: a missing valid_from reads as created_at, which gives the
        # seed's max(created_at, last_accessed_at) (the max of ms, then / 1000: same float).
        valid_from: int | None = item.valid_from  # None: an item built by hand (last_seen_ms takes it)
        created, accessed = item.created_at, item.last_accessed_at
        if valid_from is None:
            seen = accessed if accessed > created else created
        elif item.access_count > 0 or accessed > created:
            seen = accessed if accessed > valid_from else valid_from
        else:
            seen = valid_from
        age = now - seen / 1000.0
        rec = float(0.5 ** ((age if age > 0.0 else 0.0) / half_life_seconds))  # max(0.0, age)
        importance = item.importance
        append((ws * sim + wr * rec + wi * importance, sim, rec, item, distance))
    scored.sort(key=_FIRST, reverse=True)  # stable: ties keep the candidates' order
    if first is not None:
        scored = _ahead(scored, first)
    if explain:
        return [
            new_hit(
                item,
                score,
                1.0 - distance / 2.0,
                distance,
                ScoreParts(sim, rec, item.importance, weights, score),
            )
            for score, sim, rec, item, distance in scored[:k]
        ]
    return [
        new_hit(item, score, 1.0 - distance / 2.0, distance, None)
        for score, _, _, item, distance in scored[:k]
    ]


def _ahead(scored: list[_Scored], first: Callable[[MemoryItem], bool]) -> list[_Scored]:
    """``scored`` (best first) with the entries ``first`` holds ahead, each lifted just past the best other."""
    held = [first(entry[3]) for entry in scored]
    if all(held) or not any(held):
        return scored
    inner = [e for e, h in zip(scored, held, strict=True) if h]
    outer = [e for e, h in zip(scored, held, strict=True) if not h]
    lift = max(0.0, outer[0][0] - inner[-1][0]) + 1e-6  # the best other's score less the worst inside's
    return [(score + lift, sim, rec, item, d) for score, sim, rec, item, d in inner] + outer


def _reranked(
    reranker: Reranker, query: str, admitted: list[tuple[MemoryItem, float]]
) -> list[tuple[float | None, MemoryItem, float]]:
    """``(fused similarity clamped to 0..1, item, its KNN distance)`` in the re-ranker's order.

    A candidate the re-ranker returns twice counts once; one it drops is left out. The
    shipped ``HybridRanker`` on distinct ids skips the ``Reranker`` protocol's pairs and
    its lookups (the same entries: its ``rerank`` returns each candidate once, with the
    distance it was given).
    """
    if type(reranker) is HybridRanker and len({item.id for item, _ in admitted}) == len(admitted):
        return [
            (_unit(fused), item, distance) for fused, _, _, item, distance in reranker._fused(query, admitted)
        ]
    distance_of = {item.id: d for item, d in admitted}
    done: set[str] = set()
    out: list[tuple[float | None, MemoryItem, float]] = []
    for item, lifted in reranker.rerank(query, admitted):
        if item.id in distance_of and item.id not in done:
            done.add(item.id)
            out.append((_unit(float(lifted)), item, distance_of[item.id]))
    return out


def _unit(value: float) -> float:
    """``min(1.0, max(0.0, value))``."""
    return min(1.0, max(0.0, value))
