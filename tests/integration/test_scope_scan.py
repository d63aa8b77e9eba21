"""A scoped recall equals an exact KNN over its scope, whether scanned or walked (``tiers.scope_scan``).

On valkey-search a scope known to hold at most ``SCAN_LIMIT`` memories is read whole and
ranked in the client; every other case (RediSearch, a large scope) sends the KNN. The
expected answer is computed here: brute-force cosine distance over the scope's memories,
from the vectors the test wrote. On a store this small, with a large EF_RUNTIME, the HNSW is
exact, so the first recall (the KNN, which learns the scope's size) and the second (the scan)
must also agree with each other: same ids, same order.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from betterdb_memory import HashingEmbedder, MemoryStore

pytestmark = pytest.mark.integration

DIM = 32
THREADS = ("ta", "tb", "tc")


def _unit(rng: random.Random) -> list[float]:
    v = np.asarray([rng.gauss(0.0, 1.0) for _ in range(DIM)], dtype=np.float64)
    return [float(x) for x in (v / np.linalg.norm(v)).astype(np.float32)]


async def _populate(
    store: MemoryStore, rng: random.Random, per_thread: int = 40
) -> dict[str, dict[str, Any]]:
    """Memories over three threads, some tagged, some ``web``-sourced; id -> what was written."""
    written: dict[str, dict[str, Any]] = {}
    for t in THREADS:
        for i in range(per_thread):
            vector = _unit(rng)
            tags = ["red"] if i % 3 == 0 else []
            source = "web" if i % 4 == 0 else "chat"
            mid = await store.remember(
                f"memory {i} of {t}", thread_id=t, tags=tags, source=source, vector=vector, importance=0.5
            )
            written[mid] = {"thread": t, "vector": vector, "tags": tags, "source": source}
    return written


def _exact(
    written: dict[str, dict[str, Any]], query: Sequence[float], k: int, keep: Callable[[dict[str, Any]], bool]
) -> list[tuple[str, float]]:
    q = np.asarray(query, dtype=np.float64)
    rows = []
    for mid, m in written.items():
        if keep(m):
            v = np.asarray(m["vector"], dtype=np.float64)
            rows.append((mid, 1.0 - float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))))
    rows.sort(key=lambda r: r[1])
    return rows[:k]


def _eager(store: MemoryStore) -> MemoryStore:
    """The store scans every scope within the limit, however small the index (a walk is cheap here)."""
    store._recall._scan.sizes.ratio = 1e9
    return store


def _scanned(store: MemoryStore, k: int = 5) -> int:
    """How many filters the store would scan for ``k`` hits (0 on RediSearch: it never scans)."""
    sizes = store._recall._scan.sizes
    return sum(1 for key in list(sizes._entries) if sizes.scan(key, k))


async def _recall(
    store: MemoryStore, query: Sequence[float], k: int, **scope: Any
) -> list[tuple[str, float]]:
    hits = await store.recall_by_vector(query, k=k, threshold=2.0, reinforce=False, **scope)
    return [(h.item.id, h.distance) for h in hits]


def _same(got: list[tuple[str, float]], want: list[tuple[str, float]]) -> None:
    assert [g[0] for g in got] == [w[0] for w in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert a == pytest.approx(b, abs=1e-5)


async def test_scoped_recall_equals_brute_force(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    rng = random.Random(2912)
    # EF_RUNTIME 10 (the default) lets a filtered walk miss one of the 5 in a 40-memory shard on
    # a cluster (2 of 9 runs): the walk is approximate by design; with 200 it is exact here.
    store = _eager(make_store(embedder=HashingEmbedder(dimensions=DIM), hnsw_ef_runtime=200))
    written = await _populate(store, rng)
    for n in range(6):
        query = _unit(rng)
        t = THREADS[n % 3]
        want = _exact(written, query, 5, lambda m, t=t: m["thread"] == t)
        first = await _recall(store, query, 5, thread_id=t)  # the KNN (it learns the scope's size)
        second = await _recall(store, query, 5, thread_id=t)  # a scan on valkey-search
        _same(first, want)
        _same(second, want)
    assert _scanned(store) == (3 if expected_engine == "valkey-search" else 0)
    store._recall._scan.sizes.ratio = 0.4  # the default: 40 memories of 120 are cheaper walked
    assert _scanned(store) == 0
    _same(
        await _recall(store, query, 5, thread_id="tc"),
        _exact(written, query, 5, lambda m: m["thread"] == "tc"),
    )


async def test_tags_and_negations_keep_their_meaning(make_store: Callable[..., MemoryStore]) -> None:
    rng = random.Random(2913)
    store = _eager(make_store(embedder=HashingEmbedder(dimensions=DIM)))
    written = await _populate(store, rng)
    for _ in range(2):  # the second round is answered by scans on valkey-search
        query = _unit(rng)
        want = _exact(written, query, 6, lambda m: "red" in m["tags"] and m["thread"] == "tb")
        _same(await _recall(store, query, 6, thread_id="tb", tags=["red"]), want)
        want = _exact(written, query, 6, lambda m: m["source"] != "web" and m["thread"] == "ta")
        hits = await store.recall_by_vector(
            query, k=6, threshold=2.0, reinforce=False, thread_id="ta", where={"source": {"$ne": "web"}}
        )
        _same([(h.item.id, h.distance) for h in hits], want)


async def test_a_scope_above_the_limit_keeps_the_knn(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    rng = random.Random(2914)
    # EF_RUNTIME 200: the KNN is held to a brute-force answer (EF 10 let a filtered walk on a
    # cluster shard miss the nearest, once in a CI run under load).
    store = _eager(make_store(embedder=HashingEmbedder(dimensions=DIM), hnsw_ef_runtime=200))
    written = await _populate(store, rng, per_thread=25)
    sizes = store._recall._scan.sizes
    sizes.limit = 10  # every thread (25) is now too big to scan
    query = _unit(rng)
    want = _exact(written, query, 4, lambda m: m["thread"] == "ta")
    for _ in range(3):
        _same(await _recall(store, query, 4, thread_id="ta"), want)
    assert _scanned(store) == 0
    # A scope that outgrows the limit after it was learned small: its scan falls back to the KNN.
    sizes.limit = 30
    tb = lambda m: m["thread"] == "tb"  # noqa: E731
    _same(await _recall(store, query, 4, thread_id="tb"), _exact(written, query, 4, tb))
    _same(await _recall(store, query, 4, thread_id="tb"), _exact(written, query, 4, tb))
    assert _scanned(store) == (2 if expected_engine == "valkey-search" else 0)  # ta (25) and tb
    for i in range(10):
        vector = _unit(rng)
        mid = await store.remember(f"later {i}", thread_id="tb", vector=vector)
        written[mid] = {"thread": "tb", "vector": vector, "tags": [], "source": None}
    _same(await _recall(store, query, 4, thread_id="tb"), _exact(written, query, 4, tb))
    assert _scanned(store) == (1 if expected_engine == "valkey-search" else 0)  # tb (35) is not


class _Spy:
    """The plans a store's recalls make and their round trips (``search`` or ``pipeline`` calls)."""

    def __init__(self, store: MemoryStore) -> None:
        scan, backend = store._recall._scan, store._recall._rt.backend
        self.plans: list[Any] = []
        self.trips = 0
        plan, search, pipeline = scan.plan, backend.search, backend.pipeline

        def spy_plan(*args: Any, **kwargs: Any) -> Any:
            self.plans.append(plan(*args, **kwargs))
            return self.plans[-1]

        async def spy_search(*args: Any, **kwargs: Any) -> Any:
            self.trips += 1
            return await search(*args, **kwargs)

        async def spy_pipeline(*args: Any, **kwargs: Any) -> Any:
            self.trips += 1
            return await pipeline(*args, **kwargs)

        scan.plan = spy_plan  # type: ignore[method-assign]
        backend.search = spy_search  # type: ignore[method-assign]
        backend.pipeline = spy_pipeline  # type: ignore[method-assign]

    def reset(self) -> None:
        self.plans.clear()
        self.trips = 0

    @property
    def knn_sent(self) -> list[bool]:
        """Per plan: whether its main query was the KNN (else the filter's scan)."""
        return ["=>[KNN" in str(p.args[2]) for p in self.plans]


async def _fresh(make_store: Callable[..., MemoryStore], **options: Any) -> MemoryStore:
    """Another process's store over the same memories: it knows no scope yet (the index's
    size it reads when it opens, and again with its first read, unscoped: never scanned)."""
    store = _eager(make_store(embedder=HashingEmbedder(dimensions=DIM), **options))
    await _recall(store, _unit(random.Random(0)), 5)
    return store


async def test_the_first_recall_of_a_scope_is_its_scan(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """A scope never recalled is read whole by one bounded scan, not walked (issue 29).

    Before, a filter's first recall sent the filtered KNN (the walk: 100-400 ms at 100k+
    memories) with a count, and only later recalls scanned.
    """
    rng = random.Random(2917)
    written = await _populate(_eager(make_store(embedder=HashingEmbedder(dimensions=DIM))), rng)
    store = await _fresh(make_store)
    spy = _Spy(store)
    valkey = expected_engine == "valkey-search"
    for t in THREADS:
        query = _unit(rng)
        _same(
            await _recall(store, query, 5, thread_id=t),
            _exact(written, query, 5, lambda m, t=t: m["thread"] == t),
        )
        want = _exact(written, query, 6, lambda m, t=t: m["thread"] == t and "red" in m["tags"])
        _same(await _recall(store, query, 6, thread_id=t, tags=["red"]), want)
    assert spy.trips == 6  # one round trip each, the first of every filter included
    assert [p.scan for p in spy.plans] == [valkey] * 6
    assert spy.knn_sent == [not valkey] * 6
    assert _scanned(store) == (6 if valkey else 0)


async def test_a_new_kind_of_scope_reads_a_little_first(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """The first never-seen filter of a shape reads ``FIRST_PROBE`` memories; a scope over that
    but worth scanning is then read whole (a second round trip), and later filters of its
    shape are read whole at once."""
    rng = random.Random(2919)
    written = await _populate(_eager(make_store(embedder=HashingEmbedder(dimensions=DIM))), rng)
    store = await _fresh(make_store)
    store._recall._scan.sizes.first = 5  # threads hold 40
    spy = _Spy(store)
    for t in THREADS:
        query = _unit(rng)
        want = _exact(written, query, 5, lambda m, t=t: m["thread"] == t)
        _same(await _recall(store, query, 5, thread_id=t), want)
    if expected_engine != "valkey-search":
        assert spy.trips == 3
        return
    assert spy.trips == 2 + 1 + 1
    assert [p.limit for p in spy.plans] == [5, 2_000, 2_000] and all(p.scan for p in spy.plans)
    assert _scanned(store) == 3


async def test_one_round_trip_per_recall_small_or_large(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """Counts ride in the query's pipeline, once; afterwards a scan or a KNN goes alone."""
    rng = random.Random(2915)
    await _populate(_eager(make_store(embedder=HashingEmbedder(dimensions=DIM))), rng, per_thread=10)
    store = await _fresh(make_store)
    spy, sizes = _Spy(store), store._recall._scan.sizes
    query = _unit(rng)
    for _ in range(3):
        for t in THREADS:
            await _recall(store, query, 5, thread_id=t)
    assert spy.trips == 9
    valkey = expected_engine == "valkey-search"
    assert [bool(p.probe) for p in spy.plans] == [False] * 9  # the index's count rode with the unscoped read
    assert [p.scan for p in spy.plans] == [valkey] * 9
    sizes.limit = 5  # every scope is now too big: the KNN, no count until the counts age
    spy.reset()
    for t in THREADS:
        await _recall(store, query, 5, thread_id=t)
    assert spy.trips == 3 and not any(p.scan or p.probe for p in spy.plans)


async def test_a_kind_of_scope_found_large_is_walked_when_new(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    """A never-seen filter found over its bound falls back to the KNN (two round trips); after
    ``LARGE_STREAK`` such misses of one shape, that shape's misses send the KNN with a count
    (one round trip), until a count finds one small again. Every answer stays exact."""
    rng = random.Random(2918)
    written = await _populate(
        _eager(make_store(embedder=HashingEmbedder(dimensions=DIM))), rng, per_thread=25
    )
    store = await _fresh(make_store)
    sizes = store._recall._scan.sizes
    sizes.limit = 10  # every thread (25) is over the bound
    spy = _Spy(store)
    query = _unit(rng)
    for t in THREADS:
        _same(
            await _recall(store, query, 4, thread_id=t),
            _exact(written, query, 4, lambda m, t=t: m["thread"] == t),
        )
    valkey = expected_engine == "valkey-search"
    if not valkey:
        assert spy.trips == 3 and not any(p.scan for p in spy.plans)
        return
    assert [p.scan for p in spy.plans] == [True, True, False]  # ta, tb probed; tc walked
    assert spy.trips == 2 + 2 + 1 and bool(spy.plans[2].probe)  # tc's KNN carried its count
    spy.reset()  # another shape (thread and tag) is still probed
    red = lambda m: m["thread"] == "ta" and "red" in m["tags"]  # noqa: E731
    _same(await _recall(store, query, 4, thread_id="ta", tags=["red"]), _exact(written, query, 4, red))
    assert [p.scan for p in spy.plans] == [True] and spy.trips == 1  # 9 red memories: within 10
    for i in range(5):  # a small thread, walked (its shape runs large) but counted small
        vector = _unit(rng)
        mid = await store.remember(f"small {i}", thread_id="td", vector=vector)
        written[mid] = {"thread": "td", "vector": vector, "tags": [], "source": None}
    spy.reset()
    td = lambda m: m["thread"] == "td"  # noqa: E731
    _same(await _recall(store, query, 4, thread_id="td"), _exact(written, query, 4, td))
    assert [p.scan for p in spy.plans] == [False]
    for i in range(3):  # the next new thread is probed again
        vector = _unit(rng)
        mid = await store.remember(f"small {i}", thread_id="te", vector=vector)
        written[mid] = {"thread": "te", "vector": vector, "tags": [], "source": None}
    spy.reset()
    te = lambda m: m["thread"] == "te"  # noqa: E731
    _same(await _recall(store, query, 4, thread_id="te"), _exact(written, query, 4, te))
    assert [p.scan for p in spy.plans] == [True] and spy.trips == 1


async def test_escaped_scope_values_scan_their_own_memories(
    make_store: Callable[..., MemoryStore], expected_engine: str
) -> None:
    rng = random.Random(2916)
    store = _eager(make_store(embedder=HashingEmbedder(dimensions=DIM)))
    written: dict[str, dict[str, Any]] = {}
    for thread in ("a b-{c}|d", "a b", "a"):
        for i in range(12):
            vector = _unit(rng)
            mid = await store.remember(f"m {i} {thread}", thread_id=thread, vector=vector)
            written[mid] = {"thread": thread, "vector": vector}
    query = _unit(rng)
    for thread in ("a b-{c}|d", "a b", "a"):
        want = _exact(written, query, 20, lambda m, t=thread: m["thread"] == t)
        assert len(want) == 12
        for _ in range(2):  # the KNN, then the scan on valkey-search
            _same(await _recall(store, query, 20, thread_id=thread), want)
    assert _scanned(store, 20) == (3 if expected_engine == "valkey-search" else 0)
