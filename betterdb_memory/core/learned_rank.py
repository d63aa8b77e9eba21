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
new dependency, standard library only. Regenerate them with

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

Cost: one pass over each candidate's cached term profile per query term, one
time-parser pass over the query (a regex search when it names no time), two sorts
of the candidates: ``O(candidates x query terms + candidates log candidates)``, the
same order as ``HybridRanker``. Pure: no I/O, no clock, no randomness; the order of
the input does not change the output.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .models import MemoryItem
from .query_dates import date_columns, query_dates
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


@functools.lru_cache(maxsize=8192)
def profile(text: str) -> Profile:
    """The ``Profile`` of ``text`` (cached: the same memories come back query after query)."""
    terms = _RANKER.terms(text)
    positions: dict[str, list[int]] = {}
    for i, t in enumerate(terms):
        positions.setdefault(t, []).append(i)
    match = _SPEAKER.match(text[:48])
    speaker = frozenset(match.group(1).casefold().split()) if match else frozenset()
    return Profile(
        {t: len(p) for t, p in positions.items()},
        {t: tuple(p) for t, p in positions.items()},
        len(terms),
        math.log1p(len(terms)),
        speaker,
    )


def is_turn(text: str) -> bool:
    """Whether ``text`` is stored as a conversation turn: it opens with a speaker's name and a colon.

    Turns are ranked with their neighbours here, and kept out of same-slot supersession
    (``tiers.time_recall``): two turns of one speaker on one topic are not two versions
    of one fact (on LoCoMo, superseding turns cost 11 points of hit@5).
    """
    return bool(profile(text).speaker)


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


def _ranks(values: Sequence[float], ids: Sequence[str]) -> list[int]:
    """Each value's rank, highest first (ties by id, so the input order never matters)."""
    out = [0] * len(values)
    for r, (_, _, i) in enumerate(sorted(zip([-v for v in values], ids, range(len(values)), strict=True))):
        out[i] = r
    return out


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
    n = len(contents)
    if n == 0:
        return [[] for _ in FEATURES]
    qterms = sorted(set(_RANKER.terms(query)))
    profs = [profile(c) for c in contents]
    dense = [1.0 - d for d in distances]
    mean = math.fsum(dense) / n  # fsum: exact, so the input order never changes a bit
    var = math.fsum([x * x for x in dense]) / n - mean * mean
    std = math.sqrt(var) if var > 1e-18 else 1.0
    # Term by term over the candidates, as HybridRanker.lexical_scores (sorted: sums never depend on order).
    lexical = [0.0] * n
    matched = [0] * n
    rarest = [0.0] * n
    total_idf = max_idf = 0.0
    for t in qterms:
        tfs = [p.counts.get(t, 0) for p in profs]
        df = n - tfs.count(0)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        total_idf += idf
        max_idf = max(max_idf, idf)
        if df:
            for i, tf in enumerate(tfs):
                if tf:
                    lexical[i] += idf * tf / (tf + _K1)
                    matched[i] += 1
                    if idf > rarest[i]:
                        rarest[i] = idf
    if total_idf > 0:
        lexical = [min(1.0, x / total_idf) for x in lexical]
    dense_rank = _ranks(dense, ids)
    lex_rank = _ranks(lexical, ids)
    z = [(x - mean) / std for x in dense]
    prev_lex = [0.0] * n
    next_lex = [0.0] * n
    prev2_lex = [0.0] * n
    next2_lex = [0.0] * n
    prev_z = [0.0] * n
    next_z = [0.0] * n
    if order is not None:
        # Grouped by thread (the key less its last two items), each sorted by (time, id): one
        # comparison of a whole key per pair would re-compare the shared scope strings each time.
        threads: dict[tuple[object, ...], list[tuple[object, object, int]]] = {}
        for i, key in enumerate(order):
            if key is not None:
                threads.setdefault(key[:-2], []).append((key[-2], key[-1], i))
        for members in threads.values():
            members.sort()
            seq = [i for _, _, i in members]
            for k in range(len(seq) - 1):
                a, b = seq[k], seq[k + 1]
                next_lex[a], prev_lex[b] = lexical[b], lexical[a]
                next_z[a], prev_z[b] = z[b], z[a]
                if k + 2 < len(seq):
                    c = seq[k + 2]
                    next2_lex[a], prev2_lex[c] = lexical[c], lexical[a]
    proximity = [0.0] * n
    for i in range(n):
        if matched[i] >= 2:
            pos = profs[i].positions
            hits = sorted((q, t) for t in qterms if t in pos for q in pos[t])
            best = min((b[0] - a[0] for a, b in itertools.pairwise(hits) if a[1] != b[1]), default=0)
            proximity[i] = 1.0 / best if best else 0.0
    if dates is not None:
        month, year, day = date_columns(query_dates(query, as_of), dates)
    else:
        month, year, day = [0.0] * n, [0.0] * n, [0.0] * n
    words = {w.casefold() for w in _WORD.findall(query)} if any(p.speaker for p in profs) else set()
    nq = len(qterms) or 1
    inv_max = 1.0 / max_idf if max_idf > 0 else 0.0
    return [
        dense,
        z,
        [1.0 / (1 + r) for r in dense_rank],
        lexical,
        [1.0 / (1 + r) if x > 0 else 0.0 for r, x in zip(lex_rank, lexical, strict=True)],
        [m / nq for m in matched],
        [r * inv_max for r in rarest],
        proximity,
        [p.log_len for p in profs],
        [1.0 if p.speaker and p.speaker <= words else 0.0 for p in profs],
        prev_lex,
        next_lex,
        prev2_lex,
        next2_lex,
        prev_z,
        next_z,
        month,
        year,
        day,
    ]


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
    cols = columns(query, contents, distances, ids, order, dates, as_of)
    return [list(row) for row in zip(*cols, strict=True)]


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
        self.calibration = (float(calibration[0]), float(calibration[1]))
        self.neighbour_key = neighbour_key

    def __repr__(self) -> str:
        return f"LearnedRanker({len(self.weights)} features)"

    def scores(self, query: str, candidates: Sequence[tuple[MemoryItem, float]]) -> list[float]:
        """The model's score of each candidate, in input order."""
        if not candidates:
            return []
        key = self.neighbour_key
        cols = columns(
            query,
            [item.content for item, _ in candidates],
            [d for _, d in candidates],
            [item.id for item, _ in candidates],
            [key(item) for item, _ in candidates] if key is not None else None,
            [it.valid_from if it.valid_from is not None else it.created_at for it, _ in candidates],
            max(it.created_at for it, _ in candidates),
        )
        total = [0.0] * len(candidates)
        for w, col in zip(self.weights, cols, strict=True):
            if w and any(col):  # most queries name no date and most candidates have no neighbour
                total = list(map(operator.add, total, map(w.__mul__, col)))
        return total

    def rerank(
        self, query: str, candidates: Sequence[tuple[MemoryItem, float]]
    ) -> list[tuple[MemoryItem, float]]:
        """``(item, calibrated similarity)`` pairs, best first (the ``Reranker`` protocol)."""
        scores = self.scores(query, candidates)
        a, b = self.calibration
        order = sorted(
            zip(
                [-s for s in scores],
                [d for _, d in candidates],
                [it.id for it, _ in candidates],
                range(len(scores)),
                strict=True,
            )
        )
        exp = math.exp
        return [(candidates[i][0], 1.0 / (1.0 + exp(min(700.0, -(a * -neg + b))))) for neg, _, _, i in order]
