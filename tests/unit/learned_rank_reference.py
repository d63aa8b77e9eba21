"""A frozen copy of ``LearnedRanker``'s scoring as it was before it was vectorised (issue 28).

``test_core_learned_rank`` checks that the shipped ranker gives the same order and the
same scores (within 1e-9) as this one; ``bench/bench_rank.py --check`` does it over
LoCoMo. Do not edit: it is the reference, not a second implementation to maintain.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Sequence

from betterdb_memory.core.learned_rank import (
    _K1,
    _RANKER,
    _WORD,
    CALIBRATION,
    FEATURES,
    WEIGHTS,
    profile,
    thread_order,
)
from betterdb_memory.core.models import MemoryItem
from betterdb_memory.core.query_dates import date_columns, query_dates


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


class ReferenceRanker:
    """``LearnedRanker`` before issue 28's vectorisation (scores and rerank only)."""

    def __init__(
        self,
        *,
        weights: Sequence[float] = WEIGHTS,
        calibration: tuple[float, float] = CALIBRATION,
        neighbour_key: Callable[[MemoryItem], tuple[object, ...] | None] | None = thread_order,
    ) -> None:
        self.weights = tuple(float(w) for w in weights)
        self.calibration = (float(calibration[0]), float(calibration[1]))
        self.neighbour_key = neighbour_key

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
