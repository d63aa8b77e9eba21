"""Issue 26 through the public API: ``remember(valid_from=)`` then ``recall`` on a real engine.

Called by ``bench/temporal_eval.py`` (which writes bench/results/temporal.md). The
vectors come from the same ONNX MiniLM cache as the offline part, passed to
``remember_many(vector=)`` and ``recall_by_vector(query=)`` (the query text is what
the recall reads its time window from and what the re-ranker reads), so the figures
are the library's default recall path: LearnedRanker, composite score, time window,
same-slot supersession.

Part A: every statement of the knowledge-update set is one memory with its date as
``valid_from`` and no subject; each question about the present counts as current-first
when the current version is the top hit. The people are split in two: the rule's
threshold is checked on one half offline (``temporal_eval.fit``), the figures here are
on the other half (held out).

Part B: the diary's events are written in date order; each question is asked once the
store holds exactly the events before its ``as_of`` day, with "now" set to that day
through the parser's clock (``core.timewindow.now_ms``) rather than ``recall(as_of=)``,
so that every recall measured is one about the present (``as_of`` also asks the
history index, which the latency comparison must leave out). Precision@5 inside the window, topic hit@5, and the
latency of a recall with a window against one without, on the same store.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from temporal_data import dated_events, knowledge_updates

from betterdb_memory import MemoryStore
from betterdb_memory.core import timewindow
from betterdb_memory.embedders import OnnxEmbedder
from betterdb_memory.tiers import time_recall

K = 5


@contextmanager
def clock(ms: int) -> Iterator[None]:
    """The parser's "now" (the question's day), for the duration of one recall."""
    saved = timewindow.now_ms
    timewindow.now_ms = lambda: ms  # type: ignore[assignment]
    try:
        yield
    finally:
        timewindow.now_ms = saved  # type: ignore[assignment]


@contextmanager
def without_supersession() -> Iterator[None]:
    """The recall without same-slot supersession (the comparison row)."""
    saved = time_recall.TimeRecall._present

    async def same(self: Any, hits: Any, vectors: Any, query: str = "", needs: Any = None) -> Any:
        return hits

    time_recall.TimeRecall._present = same  # type: ignore[method-assign]
    try:
        yield
    finally:
        time_recall.TimeRecall._present = saved  # type: ignore[method-assign]


async def _store(url: str | None, data_dir: str) -> MemoryStore:
    return await MemoryStore.connect(
        url, name=f"temporal-{uuid.uuid4().hex[:8]}", data_dir=data_dir, embedder=OnnxEmbedder()
    )


async def part_a(
    url: str | None,
    ds: knowledge_updates.Dataset,
    vecs: np.ndarray[Any, Any],
    qvecs: np.ndarray[Any, Any],
    held_out: Callable[[int], bool],
    *,
    quick: bool = False,
) -> dict[str, Any]:
    """Current-first on the held-out people's questions, with and without the rule; false supersession.

    ``quick``: the rule's row only (the comparison rows, rule off and without focus, are (0, 0)).
    """
    stmts = ds.statements
    with tempfile.TemporaryDirectory(prefix="temporal-a-") as data_dir:
        store = await _store(url, data_dir)
        try:
            for lo in range(0, len(stmts), 500):
                await store.remember_many(
                    [
                        {"content": s.text, "valid_from": s.valid_from, "vector": vecs[i].tolist()}
                        for i, s in enumerate(stmts[lo : lo + 500], start=lo)
                    ]
                )
            out: dict[str, Any] = {"plain": (0, 0), "nofocus": (0, 0)}
            rows = (("rule", _nothing), ("plain", without_supersession), ("nofocus", without_focus))
            for label, ctx in rows[:1] if quick else rows:
                hits_cf = n = 0
                with ctx():
                    for q, chain in enumerate(ds.chains):
                        if not held_out(chain.entity):
                            continue
                        hits = await store.recall_by_vector(
                            qvecs[q].tolist(), query=chain.question, k=1, threshold=2.0, reinforce=False
                        )
                        n += 1
                        hits_cf += bool(hits) and hits[0].item.content == chain.current.text
                out[label] = (hits_cf, n)
            # False supersession: a both-current pair, asked its question, never demotes either.
            fs = npairs = 0
            for pair in ds.pairs:
                if not held_out(pair.entity):
                    continue
                npairs += 1
                qv = (await store.embedder.embed([pair.question]))[0]
                hits = await store.recall_by_vector(
                    list(qv), query=pair.question, k=10, threshold=2.0, reinforce=False, explain=True
                )
                by_text = {h.item.content: h for h in hits}
                old = by_text.get(pair.older.text)
                fs += bool(
                    old is not None
                    and old.explain is not None
                    and old.explain.superseded_by is not None
                    and by_text.get(pair.newer.text) is not None
                    and old.explain.superseded_by == by_text[pair.newer.text].item.id
                )
            out["false"] = (fs, npairs)
            return out
        finally:
            await store.close()


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def without_focus() -> Iterator[None]:
    """Same-slot supersession without its focus step (the rule as it was before it)."""
    saved = time_recall.focus_scores
    time_recall.focus_scores = lambda cands, question, pairs: [c.score for c in cands]  # type: ignore[assignment]
    try:
        yield
    finally:
        time_recall.focus_scores = saved  # type: ignore[assignment]


async def part_b(
    url: str | None,
    ds: dated_events.Dataset,
    qvecs: np.ndarray[Any, Any],
    rvecs: np.ndarray[Any, Any],
    evecs: np.ndarray[Any, Any],
) -> dict[str, Any]:
    """Precision@5 inside the window through ``recall``, topic hit@5, and the latency with and without a window."""
    events = sorted(range(len(ds.events)), key=lambda i: ds.events[i].valid_from)
    order = sorted(range(len(ds.questions)), key=lambda i: ds.questions[i].as_of)
    prec: list[float] = []
    t_hit: list[float] = []
    nt_hit: list[float] = []
    nt_hit_plain: list[float] = []
    lat_window: list[float] = []
    lat_plain: list[float] = []
    by_id: dict[str, dated_events.Event] = {}
    with tempfile.TemporaryDirectory(prefix="temporal-b-") as data_dir:
        store = await _store(url, data_dir)
        try:
            written = 0
            for qi in order:
                q = ds.questions[qi]
                batch = []
                while written < len(events) and ds.events[events[written]].valid_from < q.as_of:
                    e = ds.events[events[written]]
                    batch.append(
                        {
                            "content": e.text,
                            "valid_from": e.valid_from,
                            "vector": evecs[events[written]].tolist(),
                        }
                    )
                    written += 1
                if batch:
                    ids = await store.remember_many(batch)
                    for mid, item in zip(ids, batch, strict=True):
                        by_id[mid] = next(
                            e
                            for e in ds.events
                            if e.text == item["content"] and e.valid_from == item["valid_from"]
                        )
                vec = (rvecs if q.expression is not None else qvecs)[qi].tolist()
                with clock(q.as_of):
                    t0 = time.perf_counter()
                    hits = await store.recall_by_vector(
                        vec, query=q.text, k=K, threshold=2.0, reinforce=False
                    )
                    elapsed = time.perf_counter() - t0
                got = [by_id[h.item.id] for h in hits if h.item.id in by_id]
                if q.expression is None:
                    lat_plain.append(elapsed)
                    nt_hit.append(float(any(e.topic == q.topic for e in got)))
                    with without_supersession():
                        plain = await store.recall_by_vector(
                            vec, query=q.text, k=K, threshold=2.0, reinforce=False
                        )
                    nt_hit_plain.append(
                        float(any(by_id[h.item.id].topic == q.topic for h in plain if h.item.id in by_id))
                    )
                    continue
                lat_window.append(elapsed)
                lo = q.start if q.start is not None else -(2**62)
                hi = q.end if q.end is not None else 2**62
                n_in = sum(1 for e in ds.events if e.valid_from < q.as_of and lo <= e.valid_from < hi)
                if n_in == 0:
                    continue
                prec.append(sum(lo <= e.valid_from < hi for e in got) / min(K, n_in))
                rel = [
                    e
                    for e in ds.events
                    if e.valid_from < q.as_of and lo <= e.valid_from < hi and e.topic == q.topic
                ]
                if rel:
                    t_hit.append(float(any(e.topic == q.topic and lo <= e.valid_from < hi for e in got)))
            # Latency on the full diary: every question again, with and without its window.
            lw, lp = [], []
            for qi in order:
                q = ds.questions[qi]
                if q.expression is None:
                    continue
                for text, sink in ((q.text, lw), (_no_time(q.text, q.expression), lp)):
                    vec = rvecs[qi]  # the same vector: only the window differs
                    with clock(q.as_of):
                        t0 = time.perf_counter()
                        await store.recall_by_vector(
                            vec.tolist(), query=text, k=K, threshold=2.0, reinforce=False
                        )
                        sink.append(time.perf_counter() - t0)
        finally:
            await store.close()
    return {
        "precision": statistics.fmean(prec),
        "n_prec": len(prec),
        "t_hit": statistics.fmean(t_hit),
        "nt_hit": statistics.fmean(nt_hit),
        "nt_hit_plain": statistics.fmean(nt_hit_plain),
        "n_nt": len(nt_hit),
        "lat_window_ms": _p50(lw) * 1000,
        "lat_plain_ms": _p50(lp) * 1000,
        "lat_window_p90_ms": _p90(lw) * 1000,
        "lat_plain_p90_ms": _p90(lp) * 1000,
        "n_lat": len(lw),
    }


def _no_time(text: str, expression: str) -> str:
    """The question without its time expression (the same words, so the same text search)."""
    w = timewindow.parse_time_window(text)
    return w.query if w is not None else text.replace(expression, "")


def _p50(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def _p90(xs: Sequence[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]
