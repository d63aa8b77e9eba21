"""Windows over a scope on valkey-search: read whole like their scope, never walked (issues 26, 29).

A window (``since`` / ``until``, or one in the question: "last week") only narrows its
scope, so a scope known small is scanned under any window (``core.scope_scan.scope_of``),
and a window's own events-and-states query is planned like the recall's
(``tiers.time_recall``). Each test compares a store that scans with one over the same
memories that never does (every query its KNN: the walk, exact on a store this small):
the answers must be the same. RediSearch never scans: there both stores send the KNN.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from betterdb_memory import HashingEmbedder, MemoryStore
from tests.integration.test_time_recall_history import QUESTION, _ada
from tests.round_trips import RoundTrips, counting

pytestmark = pytest.mark.integration

DIM = 32
DAY = 86_400_000
THREADS = ("wa", "wb", "wc")


def _unit(rng: random.Random) -> list[float]:
    v = np.asarray([rng.gauss(0.0, 1.0) for _ in range(DIM)], dtype=np.float64)
    return [float(x) for x in (v / np.linalg.norm(v)).astype(np.float32)]


async def _populate(store: MemoryStore, rng: random.Random, per_thread: int = 30) -> dict[str, int]:
    """Memories over three threads dated over the last 30 days; id -> valid_from."""
    now = int(time.time() * 1000)
    dated: dict[str, int] = {}
    for t in THREADS:
        for i in range(per_thread):
            valid_from = now - rng.randrange(30 * DAY)
            mid = await store.remember(
                f"I went to the market, visit {i} of {t}",
                thread_id=t,
                vector=_unit(rng),
                valid_from=valid_from,
            )
            dated[mid] = valid_from
    return dated


def _eager(store: MemoryStore) -> MemoryStore:
    """Every scope within the limit is worth scanning, however small the index (as in test_scope_scan)."""
    store._recall._scan.sizes.ratio = 1e9
    return store


def _walker(make_store: Callable[..., MemoryStore]) -> MemoryStore:
    """A store over the same memories that never scans: every query is its KNN."""
    store = make_store(embedder=HashingEmbedder(dimensions=DIM))
    store._recall._scan.scans = lambda: False  # type: ignore[method-assign]
    return store


def _pairs(hits: Sequence[Any]) -> list[tuple[str, float]]:
    return [(h.item.id, h.distance) for h in hits]


def _same(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    assert [g[0] for g in got] == [w[0] for w in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert a == pytest.approx(b, abs=1e-5)


def _window_searches(trips: RoundTrips) -> list[tuple[Any, ...]]:
    """The FT.SEARCHes of a window's events-and-states query (its clause reads ``state_from``)."""
    return [c for call in trips.calls for c in call if c[:1] == ("FT.SEARCH",) and "state_from" in str(c[2])]


async def test_a_window_in_the_question_over_a_small_scope_is_scanned(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """The window's own query was a filtered KNN (the walk: its cost grows with the store on
    valkey-search); over a scope known small it is now a scan of the window, ranked here, with
    the same answers and no filter learned for the window's bounds."""
    rng = random.Random(2601)
    store = _eager(make_store(embedder=HashingEmbedder(dimensions=DIM)))
    await _populate(store, rng)
    walker = _walker(make_store)
    for t in THREADS:  # the scopes' sizes (and the index's), learned from plain recalls
        for s in (store, walker):  # (the walker opens its index: its round trips are not counted)
            await s.recall_by_vector(_unit(rng), k=5, threshold=2.0, reinforce=False, thread_id=t)
    sizes = store._recall._scan.sizes
    learned = len(sizes)
    valkey = expected_engine == "valkey-search"
    text = "Where did I go shopping last week?"
    for n in range(6):
        query, t = _unit(rng), THREADS[n % 3]
        args: dict[str, Any] = {"query": text, "k": 5, "threshold": 2.0, "reinforce": False, "thread_id": t}
        with counting(walker) as walked:
            want = await walker.recall_by_vector(query, **args)
        with counting(store) as trips:
            got = await store.recall_by_vector(query, **args)
        _same(_pairs(got), _pairs(want))
        assert trips.depth == walked.depth  # no round trip more than the walk's
        sent = _window_searches(trips)
        assert len(sent) == 1
        assert ("=>[KNN" in str(sent[0][2])) is not valkey  # scanned on valkey-search, the KNN elsewhere
    assert len(sizes) == learned == (3 if valkey else 0)


async def test_relative_bounds_find_their_scope_s_size(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """``since`` = a week before now, to the millisecond: a new filter text every call. It was a
    miss of the scope scan's cache each time (one more entry, a first probe); now the scope's
    size decides, learned once, and answers are those of the walk."""
    rng = random.Random(2602)
    store = _eager(make_store(embedder=HashingEmbedder(dimensions=DIM)))
    dated = await _populate(store, rng)
    walker = _walker(make_store)
    sizes = store._recall._scan.sizes
    for n in range(8):
        query = _unit(rng)
        since = int(time.time() * 1000) - 7 * DAY + n
        args: dict[str, Any] = {
            "k": 5,
            "threshold": 2.0,
            "reinforce": False,
            "thread_id": "wa",
            "since": since,
        }
        want = await walker.recall_by_vector(query, **args)
        with counting(store) as trips:
            got = await store.recall_by_vector(query, **args)
        _same(_pairs(got), _pairs(want))
        assert got and all(dated[h.item.id] >= since for h in got)
        if n and expected_engine == "valkey-search":  # the scope known small: its window is read whole
            searches = [c for call in trips.calls for c in call if c[:1] == ("FT.SEARCH",)]
            assert searches and not any("=>[KNN" in str(c[2]) for c in searches)
    assert len(sizes) == (1 if expected_engine == "valkey-search" else 0)  # the scope "wa", not one per call


async def test_the_index_size_is_read_from_ft_info(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """The scan's index size came from a count over every document (``@created_at:[-inf +inf]``,
    growing with the store); now from FT.INFO's ``num_docs`` (the primaries' sum on a cluster)."""
    rng = random.Random(2603)
    written = await _populate(_eager(make_store(embedder=HashingEmbedder(dimensions=DIM))), rng)
    store = _eager(make_store(embedder=HashingEmbedder(dimensions=DIM)))
    await store.ensure_index()  # opening reads FT.INFO of both indexes: not counted here
    for scope in ({}, {"thread_id": "wb"}):  # an unscoped recall reads it too (a window sizes its scan by it)
        store._recall._scan.sizes._index_at = None  # due
        with counting(store) as trips:
            await store.recall_by_vector(_unit(rng), k=3, threshold=2.0, reinforce=False, **scope)
        sent = [c for call in trips.calls for c in call]
        infos = [c for c in sent if c[:1] == ("FT.INFO",)]
        assert not any(c[:1] == ("FT.SEARCH",) and "@created_at:[-inf +inf]" in str(c[2]) for c in sent)
        if expected_engine != "valkey-search":
            assert not infos
            continue
        assert len(infos) == 1 and infos[0][1] == store.index.name
        assert store._recall._scan.sizes.index_docs == len(written)
        with counting(store) as trips:  # fresh for COUNT_TTL_S: not sent again
            await store.recall_by_vector(_unit(rng), k=3, threshold=2.0, reinforce=False, **scope)
        assert not [c for call in trips.calls for c in call if c[:1] == ("FT.INFO",)]


async def test_a_window_over_an_unscoped_store_filled_after_it_opened_is_scanned(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """A store opened empty knew no index size, so no window of an unscoped recall was ever
    scanned (a filtered walk of the whole graph each time); the unscoped recall now reads the
    size (FT.INFO, once per ``COUNT_TTL_S``) and a window sizes its bounded scan by it."""
    rng = random.Random(2605)
    store = _eager(make_store(embedder=HashingEmbedder(dimensions=DIM)))  # a bound above the week's
    await store.recall_by_vector(_unit(rng), k=3, threshold=2.0, reinforce=False)  # opened over nothing
    await _populate(store, rng)
    walker = _walker(make_store)
    store._recall._scan.sizes._index_at = None  # the index's size due (as COUNT_TTL_S after opening)
    await store.recall_by_vector(_unit(rng), k=3, threshold=2.0, reinforce=False)
    valkey = expected_engine == "valkey-search"
    assert store._recall._scan.sizes.index_docs == (len(THREADS) * 30 if valkey else 0)
    args: dict[str, Any] = {"query": "Where did I go shopping last week?", "k": 5, "threshold": 2.0}
    for _ in range(4):
        query = _unit(rng)
        want = await walker.recall_by_vector(query, reinforce=False, **args)
        with counting(store) as trips:
            got = await store.recall_by_vector(query, reinforce=False, **args)
        _same(_pairs(got), _pairs(want))
        (sent,) = _window_searches(trips)
        assert ("=>[KNN" in str(sent[2])) is not valkey  # a week of 90 memories: read whole


async def test_an_unfiltered_recall_sends_its_own_vector(make_store: Callable[..., MemoryStore]) -> None:
    """An unfiltered recall's query text is built once per k and fields; each recall sends its own vector."""
    rng = random.Random(2604)
    store = make_store(embedder=HashingEmbedder(dimensions=DIM))
    await _populate(store, rng, per_thread=5)
    for k in (3, 3, 4, 3):
        query = _unit(rng)
        with counting(store) as trips:
            hits = await store.recall_by_vector(query, k=k, threshold=2.0, reinforce=False)
        searches = [c for call in trips.calls for c in call if c[:1] == ("FT.SEARCH",)]
        assert searches[0][6] == np.asarray(query, dtype="<f4").tobytes()
        assert f"KNN {k} " in str(searches[0][2]) and len(hits) == k
    assert len(store._recall._scan._templates) == 2  # k=3 and k=4


async def test_past_versions_of_a_small_scope_are_scanned(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """The history index's queries (a window's past versions, ``as_of``'s half) were filtered
    KNNs walking that index's graph; over a scope known small they are scans, same answers."""
    store = _eager(make_store())
    walker = make_store()
    walker._recall._scan.scans = lambda: False  # type: ignore[method-assign]
    porto, lisbon, berlin = await _ada(store)
    for s in (store, walker):  # the scope's size, learned (and the walker's index opened)
        await s.recall("Ada", thread_id="ada", reinforce=False)
    valkey = expected_engine == "valkey-search"
    calls: list[dict[str, Any]] = [
        {"query": QUESTION},
        {"query": "Where does Ada live?", "as_of": "2022-06-01"},
        {"query": QUESTION, "as_of": "2023-01-01"},
        {"query": "Where does Ada live?", "as_of": "2016-01-01"},
    ]
    for call in calls:
        args = {**call, "thread_id": "ada", "k": 3, "threshold": 2.0, "reinforce": False}
        with counting(walker) as walked:
            want = await walker.recall(**args)
        with counting(store) as trips:
            got = await store.recall(**args)
        _same(_pairs(got), _pairs(want))
        assert got[0].item.id == (porto if call.get("as_of") == "2016-01-01" else lisbon)
        assert trips.depth == walked.depth
        past = [c for c in _searches(trips) if ":hist:" in str(c[1])]
        assert past and all(("=>[KNN" in str(c[2])) is not valkey for c in past)
    assert berlin not in {h.item.id for h in got}


def _searches(trips: RoundTrips) -> list[tuple[Any, ...]]:
    return [c for call in trips.calls for c in call if c[:1] == ("FT.SEARCH",)]


async def test_a_scope_s_history_larger_than_a_scan_is_worth_is_walked(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """A scope's versions valid in a long window can outnumber its current memories: the
    history index's scan reads at most what a scan is worth at the index's size
    (``SizeClasses.bound``, not ``SCAN_LIMIT``); finding more, its KNN follows and the
    scope's history is walked from then on. Same answers as a store that never scans."""
    if expected_engine != "valkey-search":
        pytest.skip("RediSearch never scans")
    store, walker = make_store(embedder=HashingEmbedder(dimensions=DIM)), _walker(make_store)
    rng = random.Random(5)
    for person in range(3):  # three subjects, four versions each: nine past versions since 2014
        for year in (2014, 2016, 2018, 2020):
            await store.remember(
                f"Person {person} works at firm {year}.",
                thread_id="hist",
                subject=f"employer of person {person}",
                valid_from=f"{year}-02-01",
                vector=_unit(rng),
            )
    for s in (store, walker):  # the scope's size and the index's, learned
        await s.recall("firm", thread_id="hist", reinforce=False)
    sizes = store._recall._scan.sizes
    assert sizes.index_docs == 3
    sizes.ratio = 10 / (10 * 3)  # a scan is worth 3 memories here (isqrt(10)), the scope holds 3
    assert sizes.bound(10) == 3 and sizes.limit > 9
    args = {"thread_id": "hist", "k": 5, "threshold": 2.0, "reinforce": False}
    question = "Where did they work since 2014?"
    want = _pairs(await walker.recall(question, **args))
    depths = []
    for _ in range(2):
        with counting(store) as trips:
            got = await store.recall(question, **args)
        _same(_pairs(got), want)
        past = [c for c in _searches(trips) if ":hist:" in str(c[1])]
        depths.append((trips.depth, [("=>[KNN" in str(c[2])) for c in past]))
    # First: the bounded scan (LIMIT 0 4) finds 9 and its KNN follows (one more round trip);
    # then the KNN alone, in the recall's own round trip.
    assert depths[0][1] == [False, True] and depths[1][1] == [True]
    assert depths[1][0] == 1 < depths[0][0]
