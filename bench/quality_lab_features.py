"""Exploratory per-candidate features for the issue 28 lab (``bench/quality_lab.py``).

Wider than what ships (``betterdb_memory.core.learned_rank``): some features here
need what a recall does not have today (the neighbouring turns, the session date),
and are measured to say what they would be worth. Each feature is a column; one row
per (question, candidate), grouped by question.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from quality_lab import Lab, Pool

from betterdb_memory.core.ranking import HybridRanker

RANKER = HybridRanker()
MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]

FloatArray = npt.NDArray[np.float64]


@dataclass(slots=True)
class Table:
    """Feature rows of every question's pool; ``group[i]`` is the question of row ``i``."""

    names: list[str]
    x: FloatArray  # (rows, features)
    label: npt.NDArray[np.bool_]
    group: npt.NDArray[np.int64]
    turn: npt.NDArray[np.int64]
    conv: npt.NDArray[np.int64]  # conversation index of the row's question

    def col(self, name: str) -> FloatArray:
        return self.x[:, self.names.index(name)]


def _proximity(positions: dict[str, list[int]], query_terms: Sequence[str]) -> float:
    """1 / (1 + slack) of the smallest window holding two matched query terms (0: fewer than two matched)."""
    matched = [t for t in query_terms if t in positions]
    if len(matched) < 2:
        return 0.0
    events = sorted((p, t) for t in matched for p in positions[t])
    best = math.inf
    last: dict[str, int] = {}
    for p, t in events:
        for u, q in last.items():
            if u != t:
                best = min(best, p - q)
        last[t] = p
    return 1.0 / best if best < math.inf else 0.0


def table(
    lab: Lab,
    ps: Sequence[Pool],
    *,
    extra_dense: dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]] | None = None,
) -> Table:
    data = lab.data
    n_all = len(data.turns)
    terms = [RANKER.terms(t.content) for t in data.turns]
    store_df: Counter[str] = Counter(term for ts in terms for term in set(ts))
    conv_ids = {c: i for i, c in enumerate(data.convs)}
    rows: list[list[float]] = []
    labels: list[bool] = []
    groups: list[int] = []
    turn_ids: list[int] = []
    convs: list[int] = []
    names: list[str] = []
    for qi, (q, p) in enumerate(zip(data.questions, ps, strict=True)):
        qterms = sorted(set(RANKER.terms(q.text)))
        qwords = set(re.findall(r"\w+", q.text.casefold()))
        cos = 1.0 - p.distance
        knn_cos = cos[: p.knn_n]
        top, mean, std = float(knn_cos.max()), float(knn_cos.mean()), float(knn_cos.std()) or 1.0
        contents = [data.turns[j].content for j in p.turns]
        lex = RANKER.lexical_scores(q.text, contents)
        n = len(p.turns)
        counts = [Counter(terms[j]) for j in p.turns]
        lengths = [len(terms[j]) for j in p.turns]
        avg = sum(lengths) / n
        pool_df = {t: sum(1 for c in counts if t in c) for t in qterms}
        pool_idf = {t: math.log(1 + (n - pool_df[t] + 0.5) / (pool_df[t] + 0.5)) for t in qterms}
        store_idf = {t: math.log(1 + (n_all - store_df[t] + 0.5) / (store_df[t] + 0.5)) for t in qterms}
        tot_store = sum(store_idf.values()) or 1.0
        max_store = max(store_idf.values(), default=1.0) or 1.0
        dense_rank = np.argsort(np.argsort(-cos, kind="stable"), kind="stable")
        lex_rank = np.argsort(np.argsort(-np.array(lex), kind="stable"), kind="stable")
        extra = {}
        for name, (tv, qv) in (extra_dense or {}).items():
            extra[name] = tv[p.turns].astype(np.float64) @ qv[qi].astype(np.float64)
        # the neighbours' lexical evidence (lab only: a recall does not read neighbours today)
        conv_turns = data.by_conv[q.conv] if p.turns and data.turns[p.turns[0]].conv == q.conv else None
        for r, j in enumerate(p.turns):
            c = counts[r]
            matched = [t for t in qterms if t in c]
            bm25_store = 0.0
            for t in matched:
                tf = c[t]
                norm = 1.2 * (0.25 + 0.75 * lengths[r] / avg) if avg else 1.2
                bm25_store += store_idf[t] * tf * 2.2 / (tf + norm)
            positions: dict[str, list[int]] = {}
            for k, t in enumerate(terms[j]):
                positions.setdefault(t, []).append(k)
            turn = data.turns[j]
            speaker_match = float(turn.speaker.casefold() in qwords)
            other_names = 0.0
            month_match = float(any(m in qwords and m in turn.date.casefold() for m in MONTHS))
            year = re.findall(r"\b(20\d\d)\b", q.text)
            year_match = float(bool(year) and any(y in turn.date for y in year))
            prev_lex = next_lex = 0.0
            if conv_turns is not None:
                pos = turn.position
                base = conv_turns[0]
                for delta in (-1, 1):
                    k = pos + delta
                    if 0 <= k < len(conv_turns):
                        nc = Counter(terms[base + k])
                        s = sum(pool_idf[t] for t in qterms if t in nc) / (sum(pool_idf.values()) or 1.0)
                        if delta < 0:
                            prev_lex = s
                        else:
                            next_lex = s
            # the same, only when the neighbour is itself a candidate (what a recall could see)
            in_pool = {data.turns[k].position: lex[m] for m, k in enumerate(p.turns)}
            prev_pool = in_pool.get(turn.position - 1, 0.0)
            next_pool = in_pool.get(turn.position + 1, 0.0)
            near3 = max((in_pool.get(turn.position + g, 0.0) for g in (-3, -2, -1, 1, 2, 3)), default=0.0)
            ordered = sorted(in_pool)
            at = ordered.index(turn.position)
            prev_seq = in_pool[ordered[at - 1]] if at > 0 else 0.0
            next_seq = in_pool[ordered[at + 1]] if at + 1 < len(ordered) else 0.0
            feats = {
                "dense": float(cos[r]),
                "dense_gap": float(cos[r]) - top,
                "dense_z": (float(cos[r]) - mean) / std,
                "lexical": lex[r],
                "bm25_store": bm25_store / tot_store,
                "coverage": len(matched) / len(qterms) if qterms else 0.0,
                "rarest": max((store_idf[t] for t in matched), default=0.0) / max_store,
                "proximity": _proximity(positions, qterms),
                "text_only": float(r >= p.knn_n),
                "dense_rr": 1.0 / (1 + dense_rank[r]),
                "lex_rr": 1.0 / (1 + lex_rank[r]) if lex[r] > 0 else 0.0,
                "log_len": math.log1p(lengths[r]),
                "speaker": speaker_match,
                "other_names": other_names,
                "month": month_match,
                "year": year_match,
                "prev_lex": prev_lex,
                "next_lex": next_lex,
                "no_terms": float(not qterms),
                "prev_pool": prev_pool,
                "near3": near3,
                "prev_seq": prev_seq,
                "next_seq": next_seq,
                "next_pool": next_pool,
            }
            for name, v in extra.items():
                feats[name] = float(v[r])
            if not names:
                names = list(feats)
            rows.append([feats[k] for k in names])
            labels.append(turn.key in q.evidence)
            groups.append(qi)
            turn_ids.append(j)
            convs.append(conv_ids[q.conv])
    return Table(
        names,
        np.array(rows, dtype=np.float64),
        np.array(labels),
        np.array(groups),
        np.array(turn_ids),
        np.array(convs),
    )
