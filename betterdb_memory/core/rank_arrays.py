"""Candidate arrays for ``LearnedRanker``: the parts of its features that are not per-text lookups.

``learned_rank`` reads each candidate's cached text profile and fields once; what it
computes from them across the candidates lives here, on numpy arrays: the query terms'
counts and the nearest pair of them in every candidate (over the texts' numbered
terms), the order by id
that breaks every tie, where each candidate sits in its thread and who its neighbours
are, how near two matched query terms sit, and whether a candidate's date falls in a
month, year or day the query names. Each replaces a Python loop over the candidates
(or over pairs of them) with a few array operations, keeping every float operation
of the loop it replaced in the same order, so the ranker's output is the same to the
bit (``tests/unit/learned_rank_reference.py``, ``bench/bench_rank.py --check``).

Pure: no I/O, no clock; the order of the candidates never changes a result.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .query_dates import QueryDates

__all__ = [
    "FloatArray",
    "IntArray",
    "Places",
    "by_id",
    "dates",
    "intern",
    "neighbours",
    "places",
    "proximity",
    "term_matrix",
    "turn_places",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: Every term a cached text profile holds, numbered (``intern``): a text's terms as an int
#: array, so a recall's query-term counts and proximity are a few array operations over
#: all its candidates at once instead of a dict lookup per term and candidate.
_TERM_IDS: dict[str, int] = {}
#: Past this many terms the numbering starts over, at the start of a recall's ranking
#: (``learned_rank`` then drops its profile cache, whose arrays hold the old numbers): a
#: bound on memory for a long-lived process.
MAX_TERMS = 1 << 20


_NUMBERING = threading.Lock()


def intern(terms: Sequence[str]) -> IntArray:
    """``terms`` as their numbers (new terms numbered on first sight; once per text, profiles are cached).

    Locked: two threads numbering new terms at once would give two terms one number.
    """
    table = _TERM_IDS
    with _NUMBERING:
        return np.fromiter((table.setdefault(t, len(table)) for t in terms), np.intp, len(terms))


def numbering_full() -> bool:
    """Whether the numbering is full: the caller clears it (``forget_terms``) with its cache."""
    return len(_TERM_IDS) >= MAX_TERMS


def forget_terms() -> None:
    """Start the numbering over (only together with every array ``intern`` returned)."""
    with _NUMBERING:
        _TERM_IDS.clear()


def term_matrix(
    term_ids: Sequence[IntArray], lengths: IntArray, qterms: Sequence[str]
) -> tuple[FloatArray, FloatArray]:
    """Query terms x candidates counts, and each candidate's ``proximity`` (one pass, whole arrays).

    ``term_ids[i]``: candidate ``i``'s terms in text order (``intern``); ``qterms``: the
    query's distinct terms, sorted. Proximity is ``proximity``'s: 1 / the smallest gap
    between two adjacent matched words that are different terms (0 without such a pair).
    """
    n, m = len(term_ids), len(qterms)
    qid = np.fromiter((_TERM_IDS.get(t, -1) for t in qterms), np.intp, m)
    flat = np.concatenate(term_ids)  # every candidate's terms, one after the other
    near = np.zeros(n)
    if not len(flat):
        return np.zeros((m, n)), near
    sort = np.argsort(qid)
    j = np.searchsorted(qid[sort], flat)
    np.minimum(j, m - 1, out=j)
    at = np.flatnonzero(qid[sort][j] == flat)  # where a query term is, in the joined text
    term = sort[j[at]]
    who = np.repeat(np.arange(n), lengths)[at]
    tf = np.bincount(term * n + who, minlength=m * n).reshape(m, n).astype(np.float64)
    if len(at) > 1:
        pair = (who[1:] == who[:-1]) & (term[1:] != term[:-1])  # adjacent hits, one text, two terms
        if pair.any():
            gap, whose = (at[1:] - at[:-1])[pair], who[1:][pair]
            first = np.flatnonzero(np.concatenate(([True], whose[1:] != whose[:-1])))
            near[whose[first]] = 1.0 / np.minimum.reduceat(gap, first)
    return tf, near


def by_id(ids: Sequence[str]) -> IntArray:
    """Candidate positions sorted by id (then position): the tie-break of every ranking here."""
    return np.fromiter(sorted(range(len(ids)), key=ids.__getitem__), np.intp, len(ids))


#: Where candidates sit in their threads: candidate positions in thread order (thread by
#: thread, each by time then id), and the thread of each.
Places = tuple[IntArray, IntArray]


def places(order: Sequence[tuple[object, ...] | None]) -> Places | None:
    """``Places`` from thread-order keys (keys that agree but for the last two items: one thread)."""
    threads: dict[tuple[object, ...], list[tuple[object, object, int]]] = {}
    for i, key in enumerate(order):
        if key is not None:
            threads.setdefault(key[:-2], []).append((key[-2], key[-1], i))
    seq: list[int] = []
    group: list[int] = []
    for g, members in enumerate(threads.values()):
        members.sort()  # within one thread only: the shared scope strings are not re-compared
        seq += [i for _, _, i in members]
        group += [g] * len(members)
    return (np.array(seq, dtype=np.intp), np.array(group, dtype=np.intp)) if len(seq) > 1 else None


def turn_places(
    fields: Sequence[Sequence[Any]], speakers: Sequence[frozenset[str]], dates: Sequence[int], by_id: IntArray
) -> Places | None:
    """``Places`` in ``thread_order``'s order without building its keys (the default ranker's path)."""
    _, _, created, _, spaces, agents, threads = fields
    turns = [i for i, (t, s) in enumerate(zip(threads, speakers, strict=True)) if t and s]
    if len(turns) < 2:
        return None
    scopes = set(zip(spaces, agents, threads, strict=True))
    if len(scopes) == 1:  # a scoped recall: one thread
        group = np.zeros(len(turns), dtype=np.intp)
    else:
        codes: dict[tuple[str, str, str], int] = {}
        keys = [(spaces[i] or "", agents[i] or "", threads[i]) for i in turns]
        group = np.array([codes.setdefault(k, len(codes)) for k in keys], dtype=np.intp)
    n = len(by_id)
    at = np.fromiter(turns, np.intp, len(turns))
    id_rank = np.empty(n, dtype=np.intp)
    id_rank[by_id] = np.arange(n)
    when, written = np.fromiter(dates, np.int64, n)[at], np.fromiter(created, np.int64, n)[at]
    sort = np.lexsort((id_rank[at], written, when, group))  # thread, (date, created_at), id, position
    return at[sort], group[sort]


def dates(out: FloatArray, named: QueryDates, ms: IntArray) -> None:
    """Rows 16-18 (``month``, ``year``, ``day``): ``query_dates.date_columns``, on whole arrays."""
    months = ms.astype("datetime64[ms]").astype("datetime64[M]").astype(np.int64)  # since 1970-01, UTC
    for month in named.months:  # distinct: each candidate matches one at most
        out[16] += months % 12 + 1 == month
    for year in named.years:
        out[17] += months // 12 + 1970 == year
    for lo, hi in named.days:
        out[18] = np.logical_or(out[18], (ms >= lo) & (ms < hi))


def proximity(positions: dict[str, tuple[int, ...]], terms: Sequence[str]) -> float:
    """1 / the distance in words between two different matched terms (nearest pair)."""
    places = [positions[t] for t in terms]
    if len(places) == 2 and len(places[0]) == 1 == len(places[1]):  # the usual case: two words, once each
        return 1.0 / abs(places[0][0] - places[1][0])
    hits = sorted((q, t) for t, p in zip(terms, places, strict=True) for q in p)
    best = min((b[0] - a[0] for a, b in itertools.pairwise(hits) if a[1] != b[1]), default=0)
    return 1.0 / best if best else 0.0


def neighbours(out: FloatArray, places: Places) -> None:
    """Rows 10-15 of ``out`` (``prev_lex`` .. ``next_z``) from rows 3 (lexical) and 1 (dense_z)."""
    seq, group = places
    lex_z = out[3:0:-2]  # lexical, dense_z
    single = group[0] == group[-1]  # one thread (a scoped recall): every pair is adjacent in it
    one = group[1:] == group[:-1]  # adjacent in one thread
    a, b = (seq[:-1], seq[1:]) if single else (seq[:-1][one], seq[1:][one])
    out[10:15:4, b] = lex_z[:, a]  # prev_lex, prev_z
    out[11:16:4, a] = lex_z[:, b]  # next_lex, next_z
    two = group[2:] == group[:-2]  # two places apart in one thread (sorted by thread: the middle too)
    a, c = (seq[:-2], seq[2:]) if single else (seq[:-2][two], seq[2:][two])
    out[12, c], out[13, a] = out[3, a], out[3, c]  # prev2_lex, next2_lex
