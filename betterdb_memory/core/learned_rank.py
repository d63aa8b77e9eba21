"""A small learned ranker for hybrid recall: nineteen features per candidate, one weighted sum.

``HybridRanker`` fuses two signals with one hand-set constant: the dense similarity
and the share of the query's words a candidate holds. On LoCoMo it puts an answer
turn in the top 5 for 0.656 of questions. Its candidates say more than that: how
far a candidate stands out from the others by meaning (not only how near it is),
whether it holds the query's rarest word, whether the matched words sit together,
whether the query names the candidate's speaker, whether the memory just before
or after it in its thread matches the query's words (a question's words are often
in the turn that asked, the answer in the reply), and whether it dates from the
month, year or day the query names. A linear model over those features, fitted
with a pairwise logistic loss (an answer above a non-answer of the same question),
ranks better on conversations it was not fitted on: held out by conversation
(leave one out), hit@5 0.753 and MRR@10 0.600 against HybridRanker's 0.656 and
0.506, with the same candidates and gate (``FITTED`` holds the figures of the fit
that made the constants).

Shipped as constants (``FEATURES``, ``WEIGHTS``, ``CALIBRATION``): no download, no
new dependency (the standard library and numpy). Regenerate them with

    .venv/bin/python bench/quality_lab.py capture       # once: LoCoMo's candidate pools
    PYTHONPATH=. .venv/bin/python bench/train_learned_rank.py --write

which rewrites the block between the ``# -- fitted`` markers below (deterministic:
Newton's method from zero, no sampling).

Features of a candidate, given the query and every candidate of the recall
(``features``); ``terms`` are ``HybridRanker``'s (stop words out, English
inflections folded), IDF is over the candidates (as ``HybridRanker``'s):

- ``dense``: cosine similarity, ``1 - distance``.
- ``dense_z``: its z-score among the candidates (how far it stands out).
- ``dense_rr``: 1 / (1 + its rank by dense similarity).
- ``lexical``: ``HybridRanker``'s lexical score (IDF-weighted share of the query's
  terms held, ``k1 = 0.5``, no length normalisation).
- ``lex_rr``: 1 / (1 + its rank by lexical score); 0 with no term matched.
- ``coverage``: share of the query's distinct terms it holds.
- ``rarest``: IDF of the rarest query term it holds over the query's highest IDF.
- ``proximity``: 1 / the distance in words between two different matched terms
  (nearest pair; 0 with fewer than two).
- ``log_len``: ``log(1 + number of terms)``.
- ``speaker``: the text starts with a name and a colon (``"Caroline: ..."``, how
  conversation turns are stored) and the query holds that name.
- ``prev_lex`` / ``next_lex``: the lexical score of the candidate just before / after
  it in its thread, among the candidates (``neighbour_key`` orders them; 0 when it
  is first / last); ``prev2_lex`` / ``next2_lex``: the same two places away;
  ``prev_z`` / ``next_z``: the neighbours' ``dense_z``.
- ``month`` / ``year`` / ``day``: the candidate's date (``valid_from``, else
  ``created_at``; UTC) is in a month / year / day the query's time expressions name
  (``core.query_dates``: the package's one time parser, ``timewindow``). The month is
  matched in any year ("in June" resolves to the latest June). Relative expressions
  ("last month") count from the latest ``created_at`` among the candidates: about
  "now" in a store being written, and no clock read here.

The similarity a hit is scored on (the composite score's ``similarity`` part) is the
score mapped into 0..1 by ``sigmoid(a * score + b)`` (``CALIBRATION``), with ``a`` and
``b`` fitted (least squares in logit space) to the fused similarity ``HybridRanker``
gives the same candidates: the composite score's weights (similarity 0.6, recency
0.25, importance 0.15) keep the balance they were chosen for. (A probability of
answering would be a different scale: about 0.1 for a typical best candidate, and
recency would then outweigh meaning.)

Cost: each candidate's fields and cached text profile read once (its terms as
numbers, ``rank_arrays.intern``), one time-parser pass over the query (a regex
search when it names no time); the rest is array work over the candidates
(``core.rank_arrays``: the query-term counts and proximity in one pass over all the
candidates' terms, the rankings, the thread order and neighbours, the dates, the
weighted sum), the same bits as the plain loops it replaced. ``O(candidates x query terms +
candidates log candidates)``, like ``HybridRanker``; ``bench/bench_rank.py`` times
it. Pure: no I/O, no clock, no randomness; the order of the input does not change
the output.
"""

from __future__ import annotations

import functools
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import rank_arrays as ranks
from .models import MemoryItem
from .query_dates import query_dates
from .rank_arrays import FloatArray, IntArray, Places
from .ranking import HybridRanker

__all__ = [
    "CALIBRATION",
    "FEATURES",
    "FITTED_MODEL_ID",
    "WEIGHTS",
    "LearnedRanker",
    "Profile",
    "columns",
    "features",
    "is_turn",
    "profile",
    "thread_order",
]

# -- fitted (bench/train_learned_rank.py --write rewrites this block) ---------------------------
FEATURES: tuple[str, ...] = (
    "dense",
    "dense_z",
    "dense_rr",
    "lexical",
    "lex_rr",
    "coverage",
    "rarest",
    "proximity",
    "log_len",
    "speaker",
    "prev_lex",
    "next_lex",
    "prev2_lex",
    "next2_lex",
    "prev_z",
    "next_z",
    "month",
    "year",
    "day",
)
WEIGHTS: tuple[float, ...] = (
    5.5964425593992315,  # dense
    -0.022477268274712997,  # dense_z
    0.7143274070981666,  # dense_rr
    4.039506196489546,  # lexical
    1.420803691885577,  # lex_rr
    -1.1742509998727055,  # coverage
    1.042906984392786,  # rarest
    0.6284357096039979,  # proximity
    1.5918968303520928,  # log_len
    2.4303512230699096,  # speaker
    4.322214017749762,  # prev_lex
    2.1485956300956635,  # next_lex
    2.097583052437533,  # prev2_lex
    0.5604890174209076,  # next2_lex
    0.2234746762171227,  # prev_z
    0.1773549115549244,  # next_z
    3.3441178060320302,  # month
    2.3530738729244063,  # year
    3.1730335249872508,  # day
)
# similarity = 1 / (1 + exp(-(a * score + b)))
CALIBRATION: tuple[float, float] = (0.1413188114472022, -0.14033651784139084)
FITTED = "pairwise logistic, L2 1, on LoCoMo categories 1-4 (1536 questions, 10 conversations, KNN 50 + full-text pools of the shipped MiniLM); held out by conversation: hit@1 0.490, hit@5 0.753, hit@10 0.817, MRR@10 0.600 (HybridRanker: hit@5 0.656, MRR@10 0.506); bench/train_learned_rank.py --write"
# -- end fitted ----------------------------------------------------------------------------------

#: The embedder whose cosine distances the weights are fitted on (the shipped ONNX MiniLM,
#: ``embedders.onnx.MODEL_ID``): the store makes ``LearnedRanker`` its default re-ranker
#: for it only; another embedder's distances have another spread, so ``HybridRanker``.
FITTED_MODEL_ID = "onnx:all-MiniLM-L6-v2-int8"

_RANKER = HybridRanker()
_FIELDS = operator.attrgetter(
    "id", "content", "created_at", "valid_from", "namespace", "agent_id", "thread_id"
)
_PROFILE = operator.attrgetter("term_ids", "length", "log_len", "speaker")
_K1 = 0.5  # HybridRanker's defaults: k1 0.5, b 0
_WORD = re.compile(r"\w+")
_SPEAKER = re.compile(r"^\s*([^\W\d_][\w'.-]*(?: [^\W\d_][\w'.-]*){0,2})\s*:", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Profile:
    """What ranking reads of a text, computed once per text (cached): terms, positions, speaker."""

    counts: dict[str, int]
    positions: dict[str, tuple[int, ...]]
    length: int
    log_len: float  # log(1 + length)
    speaker: frozenset[str]  # the leading "Name:" as words (casefolded), empty if none
    term_ids: IntArray = field(compare=False, repr=False)  # the terms, numbered (rank_arrays.intern)


@functools.lru_cache(maxsize=8192)
def profile(text: str) -> Profile:
    """The ``Profile`` of ``text`` (cached: the same memories come back query after query)."""
    terms = _RANKER.terms(text)
    positions: dict[str, list[int]] = {}
    for i, t in enumerate(terms):
        positions.setdefault(t, []).append(i)
    match = _SPEAKER.match(text[:48])
    speaker = _speaker(match.group(1).casefold()) if match else _NOBODY
    return Profile(
        {t: len(p) for t, p in positions.items()},
        {t: tuple(p) for t, p in positions.items()},
        len(terms),
        math.log1p(len(terms)),
        speaker,
        ranks.intern(terms),
    )


_NOBODY: frozenset[str] = frozenset()


@functools.lru_cache(maxsize=1024)
def _speaker(name: str) -> frozenset[str]:
    """A speaker's name as words: one object per name, so a recall's speakers compare by identity."""
    return frozenset(name.split())


@functools.lru_cache(maxsize=8192)
def is_turn(text: str) -> bool:
    """Whether ``text`` is stored as a conversation turn: it opens with a speaker's name and a colon.

    Turns are ranked with their neighbours here, and kept out of same-slot supersession
    (``tiers.time_recall``): two turns of one speaker on one topic are not two versions
    of one fact (on LoCoMo, superseding turns cost 11 points of hit@5).
    """
    # ``profile(text).speaker`` without the profile (a re-ranker other than this one never
    # builds it): the name the pattern captures starts with a letter, so it has a word.
    return _SPEAKER.match(text[:48]) is not None


def thread_order(item: MemoryItem) -> tuple[str, str, str, tuple[int, int], str] | None:
    """Where a memory sits in its thread: scope, then event time (the default ``neighbour_key``).

    The time is ``(valid_from or created_at, created_at)``: a conversation imported
    after the fact carries each turn's date in ``valid_from`` (a session's turns share
    it), and ``created_at`` then the id keep the write order within one date.

    None for a memory that is not a turn of a conversation: one without a ``thread_id``,
    or whose text does not open with its speaker's name and a colon ("Caroline: ...",
    "User: ..."). The memories written around such a memory are not its context: facts
    written in a batch share one ``created_at`` and would be neighbours by id, an
    arbitrary order (on the fact-QA set, neighbours cost 2 questions in 80 at hit@5).
    """
    if not item.thread_id or not profile(item.content).speaker:
        return None
    when = item.valid_from if item.valid_from is not None else item.created_at
    return (item.namespace or "", item.agent_id or "", item.thread_id, (when, item.created_at), item.id)


def columns(
    query: str,
    contents: Sequence[str],
    distances: Sequence[float],
    ids: Sequence[str],
    order: Sequence[tuple[object, ...] | None] | None = None,
    dates: Sequence[int] | None = None,
    as_of: int = 0,
) -> list[list[float]]:
    """One column per name of ``FEATURES``, one value per candidate (``order``: thread-order keys).

    ``order[i]`` places candidate ``i`` in its thread: candidates whose keys agree but
    for the last two items (time, id) share a thread, and are neighbours when adjacent
    in key order. None (for all, or for one candidate): no neighbours. ``dates[i]``:
    when candidate ``i`` became true (epoch ms, ``valid_from`` else ``created_at``),
    matched against ``query_dates(query, as_of)``; None: the date features are 0.
    """
    places = ranks.places(order) if order is not None else None
    texts = _profiles(contents) or [()] * 4
    d = np.fromiter(distances, np.float64, len(distances))
    cols: list[list[float]] = _matrix(query, texts, d, ranks.by_id(ids), places, dates, as_of).tolist()
    return cols


def _profiles(contents: Sequence[str]) -> list[tuple[Any, ...]]:
    """The texts' ``Profile`` fields the ranker reads, field by field (one numbering of terms)."""
    if ranks.numbering_full():  # a bound on memory: start the numbering over, with the cache
        profile.cache_clear()  # (its arrays hold the old numbers)
        ranks.forget_terms()
    return list(zip(*map(_PROFILE, map(profile, contents)), strict=True))


def _matrix(
    query: str,
    texts: Sequence[Sequence[Any]],
    distances: FloatArray,
    by_id: IntArray,
    places: Places | None,
    dates: Sequence[int] | None,
    as_of: int,
) -> FloatArray:
    """``columns`` as a ``FEATURES`` x candidates array (what ``LearnedRanker`` sums).

    Vectorised over the candidates, every float operation of the plain loop it replaced
    kept in the same order (sums term by term in sorted order, ``fsum`` for the mean):
    the same bits, so the same order (``tests/unit/learned_rank_reference.py``).
    """
    term_ids, lengths, log_len, speakers = texts  # the candidates' Profiles, field by field
    n = len(log_len)
    out = np.zeros((len(FEATURES), n))
    if n == 0:
        return out
    dense = out[0]
    np.subtract(1.0, distances, out=dense)
    mean = math.fsum(dense.tolist()) / n  # fsum: exact, so the input order never changes a bit
    var = math.fsum((dense * dense).tolist()) / n - mean * mean
    out[1] = (dense - mean) / (math.sqrt(var) if var > 1e-18 else 1.0)  # dense_z
    qterms = sorted(set(_RANKER.terms(query)))
    if qterms:
        # Query terms x candidates, and proximity, from the candidates' numbered terms.
        tf, out[7] = ranks.term_matrix(term_ids, np.fromiter(lengths, np.intp, n), qterms)
        has = tf > 0
        idf = [math.log(1.0 + (n - d + 0.5) / (d + 0.5)) for d in has.sum(axis=1).tolist()]
        total_idf = 0.0
        for x in idf:  # in sorted term order, as HybridRanker.lexical_scores adds them
            total_idf += x
        part = np.array(idf)[:, None] * tf / (tf + _K1)  # 0 where a term is absent
        held = has * np.array(idf)[:, None]  # each term's IDF where it is held
        # Down the term axis of C-ordered arrays numpy adds row after row (pairwise summation
        # is only along the contiguous axis): each candidate's sum in sorted term order.
        out[3] = np.minimum(1.0, part.sum(axis=0) / total_idf)
        out[5] = has.sum(axis=0) / len(qterms)  # coverage
        out[6] = held.max(axis=0) * (1.0 / max(idf))
    # Both rankings in one sort: rank r -> 1 / (1 + r), ties by id (the input order never matters).
    ranked = by_id[np.argsort(-out[0:4:3, by_id], axis=1, kind="stable")]
    out[[[2], [4]], ranked] = 1.0 / np.arange(1.0, n + 1.0)  # dense_rr, lex_rr
    out[4] *= out[3] > 0  # lex_rr: 0 with no term matched
    if places is not None:
        ranks.neighbours(out, places)
    out[8] = np.fromiter(log_len, np.float64, n)
    if any(speakers):
        words = {w.casefold() for w in _WORD.findall(query)}
        named = {s: 1.0 if s and s <= words else 0.0 for s in set(speakers)}
        if any(named.values()):
            out[9] = np.fromiter(map(named.__getitem__, speakers), np.float64, n)
    if dates is not None and (named_dates := query_dates(query, as_of)):
        ranks.dates(out, named_dates, np.fromiter(dates, np.int64, n))
    return out


def features(
    query: str,
    contents: Sequence[str],
    distances: Sequence[float],
    ids: Sequence[str],
    order: Sequence[tuple[object, ...] | None] | None = None,
    dates: Sequence[int] | None = None,
    as_of: int = 0,
) -> list[list[float]]:
    """One row of ``FEATURES`` per candidate (``columns`` transposed: what the bench fits on)."""
    rows: list[list[float]] = np.transpose(
        columns(query, contents, distances, ids, order, dates, as_of)
    ).tolist()
    return rows


class LearnedRanker:
    """Re-orders candidates by ``WEIGHTS`` over ``features`` (the store's ``Reranker`` seam).

    Args:
        weights: one weight per name of ``FEATURES`` (default: the fitted ``WEIGHTS``).
        calibration: ``(a, b)`` of the similarity ``sigmoid(a * score + b)``.
        neighbour_key: a memory's place in its thread (``thread_order``: scope, then
            ``valid_from`` or ``created_at``; None for a memory that is not a
            conversation turn); None leaves the neighbour features at 0.
    """

    def __init__(
        self,
        *,
        weights: Sequence[float] = WEIGHTS,
        calibration: tuple[float, float] = CALIBRATION,
        neighbour_key: Callable[[MemoryItem], tuple[object, ...] | None] | None = thread_order,
    ) -> None:
        if len(weights) != len(FEATURES):
            raise ValueError(f"{len(FEATURES)} weights expected, got {len(weights)}")
        self.weights = tuple(float(w) for w in weights)
        self._weights = np.array(self.weights)[:, None]
        self.calibration = (float(calibration[0]), float(calibration[1]))
        self.neighbour_key = neighbour_key

    def __repr__(self) -> str:
        return f"LearnedRanker({len(self.weights)} features)"

    def scores(self, query: str, candidates: Sequence[tuple[MemoryItem, float]]) -> list[float]:
        """The model's score of each candidate, in input order."""
        return self._scores(query, candidates)[0].tolist() if candidates else []

    def _scores(
        self, query: str, candidates: Sequence[tuple[MemoryItem, float]]
    ) -> tuple[FloatArray, IntArray, FloatArray, Sequence[MemoryItem]]:
        """The scores (input order), the candidates' positions by id, distances and items."""
        items, distances = zip(*candidates, strict=True)
        # Every field read once, in C: id, content, created_at, valid_from, and the scope.
        fields = list(zip(*map(_FIELDS, items), strict=True))
        ids, contents, created, valid = fields[:4]
        by_id = ranks.by_id(ids)
        dates = (
            valid
            if None not in valid
            else [c if v is None else v for v, c in zip(valid, created, strict=True)]
        )
        texts = _profiles(contents)  # Profiles, field by field
        key = self.neighbour_key
        places = None
        if key is thread_order:
            places = ranks.turn_places(fields, texts[3], dates, by_id)
        elif key is not None:
            places = ranks.places([key(it) for it in items])
        dist = np.fromiter(distances, np.float64, len(distances))
        cols = _matrix(query, texts, dist, by_id, places, dates, max(created))
        # Feature by feature from 0.0 (row after row, as above): the plain sum it replaced, to
        # the bit (it skipped the all-zero features; adding a zero never changes a sum from 0.0).
        total: FloatArray = (cols * self._weights).sum(axis=0, initial=0.0)
        return total, by_id, dist, items

    def rerank(
        self, query: str, candidates: Sequence[tuple[MemoryItem, float]]
    ) -> list[tuple[MemoryItem, float]]:
        """``(item, calibrated similarity)`` pairs, best first (the ``Reranker`` protocol)."""
        if not candidates:
            return []
        scores, by_id, distances, items = self._scores(query, candidates)
        # Score descending, then distance, then id and position (by_id's order; lexsort is stable).
        order = by_id[np.lexsort((distances[by_id], -scores[by_id]))]
        a, b = self.calibration
        e = np.fromiter(map(math.exp, np.minimum(700.0, -(a * scores[order] + b)).tolist()), np.float64)
        return list(zip(map(items.__getitem__, order.tolist()), (1.0 / (1.0 + e)).tolist(), strict=True))
