"""``core.rank_arrays``: the learned ranker's array pieces against the plain definitions they replace."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from betterdb_memory.core import learned_rank, rank_arrays
from betterdb_memory.core.models import MemoryItem
from betterdb_memory.core.query_dates import QueryDates, date_columns

DAY = 86_400_000


def test_dates_match_the_scalar_date_columns_before_and_after_1970() -> None:
    """numpy's calendar (UTC months since 1970, floored) gives the same month, year and day as ``from_ms``."""
    rng = random.Random(5)
    ms = [rng.randint(-80 * 365 * DAY, 80 * 365 * DAY) for _ in range(400)] + [-1, 0, 1, -DAY, DAY - 1]
    named = QueryDates(
        frozenset({1, 5, 12}),
        frozenset({1969, 1970, 2023}),
        ((-DAY, 0), (1_683_504_000_000, 1_683_590_400_000)),
    )
    out = np.zeros((19, len(ms)))
    rank_arrays.dates(out, named, np.array(ms, dtype=np.int64))
    month, year, day = date_columns(named, ms)
    assert out[16].tolist() == month
    assert out[17].tolist() == year
    assert out[18].tolist() == day
    assert sum(day) >= 2  # -1 and -DAY fall on 1969-12-31


def _nearest_pair(positions: dict[str, tuple[int, ...]], terms: list[str]) -> float:
    hits = sorted((q, t) for t in terms for q in positions[t])
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(hits) if a[1] != b[1]]
    return 1.0 / min(gaps) if gaps else 0.0


def test_proximity_is_one_over_the_nearest_pair_of_different_terms() -> None:
    rng = random.Random(9)
    for _ in range(300):
        words = [rng.choice("abcde") for _ in range(rng.randint(2, 12))]
        positions: dict[str, list[int]] = {}
        for i, w in enumerate(words):
            positions.setdefault(w, []).append(i)
        frozen = {t: tuple(p) for t, p in positions.items()}
        terms = sorted(frozen)
        assert rank_arrays.proximity(frozen, terms) == _nearest_pair(frozen, terms)


def test_term_matrix_counts_and_proximity_match_the_per_text_definitions() -> None:
    """Counts per query term and candidate, and ``proximity`` over each candidate's matched terms."""
    rng = random.Random(11)
    for _ in range(200):
        texts = [
            [rng.choice("abcdefg") for _ in range(rng.randint(0, 10))] for _ in range(rng.randint(1, 12))
        ]
        qterms = sorted(set(rng.sample("abcxyz", rng.randint(1, 4))))
        ids = [rank_arrays.intern(t) for t in texts]
        tf, near = rank_arrays.term_matrix(ids, np.array([len(t) for t in texts], dtype=np.intp), qterms)
        for i, words in enumerate(texts):
            assert tf[:, i].tolist() == [float(words.count(t)) for t in qterms]
            positions: dict[str, list[int]] = {}
            for at, w in enumerate(words):
                positions.setdefault(w, []).append(at)
            frozen = {t: tuple(p) for t, p in positions.items()}
            held = [t for t in qterms if t in frozen]
            assert near[i] == (_nearest_pair(frozen, held) if len(held) >= 2 else 0.0)


def test_the_term_numbering_starts_over_with_the_profile_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``MAX_TERMS`` the numbering and the profiles holding it are dropped together: same ranking."""
    items = [(_turn(i, f"Ann: w{i % 7} w{i % 5} tea cake number {i}"), 0.2 + i / 100) for i in range(30)]
    ranker = learned_rank.LearnedRanker()
    want = ranker.scores("tea and cake with w3", items)
    rank_arrays.intern(["zzjunk"])
    monkeypatch.setattr(rank_arrays, "MAX_TERMS", 1)
    assert learned_rank.profile.cache_info().currsize > 0
    assert ranker.scores("tea and cake with w3", items) == want  # cleared at the start, then renumbered
    assert "zzjunk" not in rank_arrays._TERM_IDS  # the old numbering is gone


def test_turn_places_follow_the_thread_order_keys() -> None:
    """The default path's thread order equals sorting ``thread_order``-style keys (ties by id, then position)."""
    rng = random.Random(3)
    n = 40
    ids = [f"m{rng.randint(0, 9)}" for _ in range(n)]
    created = [rng.randint(0, 3) for _ in range(n)]
    dates = [rng.randint(0, 3) for _ in range(n)]
    spaces = [rng.choice([None, "", "n"]) for _ in range(n)]
    agents = [None] * n
    threads = [rng.choice(["t1", "t2", None]) for _ in range(n)]
    speakers = [frozenset({"x"}) if rng.random() < 0.8 else frozenset() for _ in range(n)]
    fields = [ids, [""] * n, created, dates, spaces, agents, threads]
    got = rank_arrays.turn_places(fields, speakers, dates, rank_arrays.by_id(ids))
    keys = [
        ((spaces[i] or "", agents[i] or "", threads[i]), (dates[i], created[i]), ids[i], i)
        if threads[i] and speakers[i]
        else None
        for i in range(n)
    ]
    want = rank_arrays.places([None if k is None else (*k[0], k[1], k[2]) for k in keys])
    assert got is not None and want is not None

    # Same threads, each in the same order (thread numbering may differ).
    def runs(places: rank_arrays.Places) -> list[list[int]]:
        seq, group = places
        return sorted([[int(i) for i in seq[group == g]] for g in np.unique(group)])

    assert runs(got) == runs(want)


def _turn(i: int, text: str) -> MemoryItem:
    return MemoryItem(
        id=f"m{i:03d}", content=text, importance=0.5, created_at=1_700_000_000_000 + i,
        last_accessed_at=0, access_count=0, thread_id="t",
    )  # fmt: skip
