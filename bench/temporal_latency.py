"""What a window in the question costs a recall: the same question with and without its time expression.

The diary of ``temporal_data.dated_events`` (856 events, ONNX MiniLM vectors cached by
``bench/temporal_eval.py``'s ``embed``) is written once into one store, with a few
subjects' past versions in the history index; then each question with a time expression
is asked without it ("plain", the same vector: only the window differs) and with it, in
each variant of the window's queries, on its ``as_of`` day (the parser's clock). The
variants of one question run back to back, in an order rotated per question, so a busy
shared host slows them alike; medians are reported, with precision@5 inside the window.

Variants (``--variants``):

* ``plain``: the question without its time expression (no window).
* ``window``: the library as it is (``TimeRecall.window``).
* ``before``: the window's queries as they were before this bench: events and states as
  two KNN queries of the recall's whole pool each, no history query.
* ``k=<n>``: the library's queries with ``n`` hits each (``window_k`` replaced).
* ``no-history``: the library's queries without the history index's.
* ``full-pool``: the recall's own KNN asks for its whole pool beside the window's query
  (before ``core.time_recall.main_k``: the window's hits came on top of the pool).
* ``rest-pool``: the recall's own KNN asks for the pool less the window's hits (``main_k``
  before it became ``k``).
* ``negated``: the window's clause as it was before its anchored form
  (``-(NOT events NOT states)`` under a match-all range, ``_negated_inside``).
* ``previous``: both (the window's queries as main had them before branch ``window``).
* ``ask-history``: the library's queries with the history index's always sent (as before
  the store's history mark, ``core.history_mark``: a store that never retired a version,
  or a window after every retirement, paid it too).
* ``knn-window``: the window's queries as filtered KNNs, never scanned (before branch
  ``window``: on valkey-search each walked the HNSW graph).
* ``main=<m>``: the recall's own KNN beside a window's asks for ``m`` hits (``k``: the
  recall's ``k``; ``main_k`` asks ``k``).
* ``text-rest``: the full-text query made from the question without its time expression
  (as the vector is), not from the whole question.

``--thread``: the diary is written in one thread, beside ``--filler`` memories with random
vectors in 100 other threads, and every recall is scoped to it (a scope small in a large
index: on valkey-search the recall's own query is then a scan, ``tiers.scope_scan``).

Stores (``--stores``): ``subjects``, the diary plus the subjects' past versions (the
history index holds 80 documents), retired while the diary runs; ``settled``, the same
versions all retired before the diary's first day (every window starts after the last
retirement: ``core.history_mark``'s bound); ``bare``, the diary alone (it never retired
a version). All live on one server; a question is asked in every (store, variant) back
to back.

    .venv/bin/python bench/temporal_latency.py               # embedded RediSearch
    .venv/bin/python bench/temporal_latency.py --url valkey://localhost:6379 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import numpy as np  # noqa: E402
from temporal_api import K, _no_time, clock  # noqa: E402
from temporal_data import dated_events  # noqa: E402
from temporal_eval import embed  # noqa: E402

from betterdb_memory import MemoryStore  # noqa: E402
from betterdb_memory.core import time_recall as core_tr  # noqa: E402
from betterdb_memory.core.codec import encode_vector  # noqa: E402
from betterdb_memory.core.query import knn_search_args  # noqa: E402
from betterdb_memory.core.timewindow import parse_time_window  # noqa: E402
from betterdb_memory.embedders import OnnxEmbedder  # noqa: E402
from betterdb_memory.tiers import hybrid, time_recall  # noqa: E402

SUBJECTS = 40  # people whose home city changed: 80 past versions in the history index


def _before(self: Any, plan: Any, flt: Any, vector: Any, *, k: int, pool: int, fields: Any) -> Any:
    """The window's queries before: events, then states, the whole pool each, no history."""
    w = plan.window
    if w is None or not plan.filters:
        return None
    index = self._rt.index
    blob = encode_vector(vector)
    clauses = [core_tr.event_clause(w, index.layout)]
    state = core_tr.state_clause(w, index.layout)
    if state is not None:
        clauses.append(state)
    searches = [
        knn_search_args(
            index.name,
            blob,
            k=pool,
            flt=dataclasses.replace(flt, clauses=(*flt.clauses, c)),
            layout=index.layout,
            return_fields=fields,
        )
        for c in clauses
    ]
    return time_recall.WindowQueries(searches, pool)


def _negated_inside(w: Any, layout: Any) -> str:
    """The window's clause before the anchored form: ``-(NOT events NOT states)`` under a match-all range."""
    state = core_tr.state_clause(w, layout)
    if state is None:
        return core_tr.event_clause(w, layout)
    if w.start_ms is not None and w.end_ms is not None and w.start_ms >= w.end_ms:
        return state
    lo = "-inf" if w.start_ms is None else str(int(w.start_ms))
    hi = "+inf" if w.end_ms is None else f"({int(w.end_ms)}"
    rng = f"[{lo} {hi}]"
    if layout.valid_from:
        not_events = f"-@valid_from:{rng} -(@created_at:{rng} -@valid_from:[-inf +inf])"
    else:
        not_events = f"-@created_at:{rng}"
    return f"-({not_events} -{state})"


_SAVED_REQUEST = hybrid.TextCandidates.request
_SAVED_NEEDED = time_recall.history_mark.needed


def _rest_request(self: Any, query: str, *a: Any, **kw: Any) -> Any:
    """``TextCandidates.request`` for the query without its first time expression (``text-rest``)."""
    w = parse_time_window(query)
    return _SAVED_REQUEST(self, w.query if w is not None else query, *a, **kw)


@contextmanager
def variant(name: str) -> Iterator[None]:
    """The library's window queries replaced as ``name`` says, for one recall."""
    saved_window, saved_k, saved_main = (
        time_recall.TimeRecall.window,
        time_recall.window_k,
        time_recall.main_k,
    )
    saved_inside = time_recall.inside_clause
    saved_plans = (time_recall.TimeRecall._inside_plan, time_recall.TimeRecall._history_plan)
    if name == "knn-window":
        time_recall.TimeRecall._inside_plan = lambda *a, **kw: None  # type: ignore[method-assign]
        time_recall.TimeRecall._history_plan = lambda *a, **kw: None  # type: ignore[method-assign]
    elif name == "before":
        time_recall.TimeRecall.window = _before  # type: ignore[method-assign]
    elif name == "no-history":

        def main_only(self: Any, *a: Any, **kw: Any) -> Any:
            out = saved_window(self, *a, **kw)
            if out is not None and out.history is not None:
                out = time_recall.WindowQueries(out.searches[:-1], out.knn_k, plans=out.plans[:-1])
            elif out is not None:
                out = time_recall.WindowQueries(out.searches, out.knn_k, plans=out.plans)
            return out

        time_recall.TimeRecall.window = main_only  # type: ignore[method-assign]
    elif name == "ask-history":
        time_recall.history_mark.needed = lambda held, start: True  # type: ignore[attr-defined]
    elif name in ("full-pool", "negated", "previous"):
        if name != "negated":
            time_recall.main_k = lambda pool, k: pool  # type: ignore[assignment]
        if name != "full-pool":
            time_recall.inside_clause = _negated_inside  # type: ignore[assignment]
    elif name.startswith("k="):
        n = int(name[2:])
        time_recall.window_k = lambda k, pool: min(n, pool)  # type: ignore[assignment]
    elif name == "rest-pool":
        time_recall.main_k = lambda pool, k: max(min(k, pool), pool - core_tr.window_k(k, pool))  # type: ignore[assignment]
    elif name.startswith("main="):  # the recall's own KNN beside a window's: k, or a number of hits
        m = name[5:]
        time_recall.main_k = (  # type: ignore[assignment]
            (lambda pool, k: min(k, pool)) if m == "k" else (lambda pool, k: min(int(m), pool))
        )
    elif name == "text-rest":  # the full-text query without the time expression (as the vector)
        hybrid.TextCandidates.request = _rest_request  # type: ignore[method-assign]
    try:
        yield
    finally:
        time_recall.TimeRecall.window = saved_window  # type: ignore[method-assign]
        time_recall.window_k = saved_k  # type: ignore[assignment]
        time_recall.main_k = saved_main  # type: ignore[assignment]
        time_recall.history_mark.needed = _SAVED_NEEDED  # type: ignore[attr-defined]
        hybrid.TextCandidates.request = _SAVED_REQUEST  # type: ignore[method-assign]
        time_recall.inside_clause = saved_inside  # type: ignore[assignment]
        time_recall.TimeRecall._inside_plan, time_recall.TimeRecall._history_plan = saved_plans  # type: ignore[method-assign]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    ds = dated_events.build()
    windows = [parse_time_window(q.text, as_of=q.as_of) for q in ds.questions]
    rests = [w.query if w is not None else q.text for q, w in zip(ds.questions, windows, strict=True)]
    texts = [e.text for e in ds.events] + [q.text for q in ds.questions] + rests
    vecs = await asyncio.to_thread(embed, texts, args.cache)  # embed runs its own loop on a miss
    ne, nq = len(ds.events), len(ds.questions)
    rvecs = vecs[ne + nq :]
    timed = [i for i, q in enumerate(ds.questions) if q.expression is not None]
    names = args.variants.split(",")
    kinds = args.stores.split(",")
    labels = [f"{kind}/{name}" for kind in kinds for name in names]
    lat: dict[str, list[float]] = {n: [] for n in labels}
    prec: dict[str, list[float]] = {n: [] for n in labels}
    server: dict[str, list[float]] = {n: [] for n in labels}  # the server's own µs per recall
    calls: dict[str, list[float]] = {n: [] for n in labels}  # commands the servers ran per recall
    cpu: dict[str, list[float]] = {n: [] for n in labels}  # this process's CPU seconds per recall
    parts: dict[str, dict[str, float]] = {n: {} for n in labels}  # server µs per kind of query (SLOWLOG)
    with tempfile.TemporaryDirectory(prefix="temporal-lat-") as data_dir:
        first = await MemoryStore.connect(
            args.url, name=f"tlat-{uuid.uuid4().hex[:8]}", data_dir=data_dir, embedder=OnnxEmbedder()
        )
        stores = {kinds[0]: first}
        for kind in kinds[1:]:
            stores[kind] = MemoryStore(
                client=first.client, name=f"tlat-{uuid.uuid4().hex[:8]}", embedder=first.embedder
            )
        # What the window counts as inside: an event dated in it, a state valid during it.
        valid: dict[str, dict[str, tuple[int, int | None]]] = {}
        try:
            thread = {"thread_id": args.thread} if args.thread else {}
            rng = np.random.default_rng(29)
            for kind, store in stores.items():
                for start in range(0, args.filler, 1000):  # other threads: the index grows, the scope not
                    n = min(1000, args.filler - start)
                    noise = rng.standard_normal((n, vecs.shape[1])).astype(np.float32)
                    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
                    await store.remember_many(
                        [
                            {
                                "content": f"filler {start + i}",
                                "vector": v.tolist(),
                                "thread_id": f"f{i % 100}",
                            }
                            for i, v in enumerate(noise)
                        ]
                    )
                ids = await store.remember_many(
                    [
                        {"content": e.text, "valid_from": e.valid_from, "vector": vecs[i].tolist(), **thread}
                        for i, e in enumerate(ds.events)
                    ]
                )
                valid[kind] = {i: (e.valid_from, None) for i, e in zip(ids, ds.events, strict=True)}
                if kind not in ("subjects", "settled"):
                    continue
                start = min(e.valid_from for e in ds.events)
                if kind == "settled":  # every version retired before the diary begins
                    start -= (3 * 200 + SUBJECTS) * 86_400_000
                for p in range(SUBJECTS):  # past versions: the history index is not empty
                    froms = [start + (v * 200 + p) * 86_400_000 for v in range(3)]
                    for v, city in enumerate(("Porto", "Lisbon", "Berlin")):
                        mid = await store.remember(
                            f"Person {p} lives in {city}.",
                            subject=f"home city of person {p}",
                            valid_from=froms[v],
                            **thread,
                        )
                        valid[kind][mid] = (froms[v], froms[v + 1] if v < 2 else 2**62)  # a state

            async def ask(qi: int, label: str) -> float:
                kind, name = label.split("/", 1)
                store = stores[kind]
                q = ds.questions[qi]
                text = _no_time(q.text, q.expression or "") if name == "plain" else q.text
                before = await _server_usec(first) if args.server else (0.0, 0.0)
                if args.slowlog:
                    await first.client.execute_command("SLOWLOG", "RESET")
                with clock(q.as_of), variant(name):
                    c0, t0 = time.process_time(), time.perf_counter()
                    hits = await store.recall_by_vector(
                        rvecs[qi].tolist(), query=text, k=K, threshold=2.0, reinforce=False, **thread
                    )
                    elapsed, spent = time.perf_counter() - t0, time.process_time() - c0
                cpu[label].append(spent)
                if args.slowlog:
                    for cls, us in _by_query(
                        await first.client.execute_command("SLOWLOG", "GET", "1000")
                    ).items():
                        parts[label][cls] = parts[label].get(cls, 0.0) + us
                if args.server:
                    usec, n_calls = await _server_usec(first)
                    server[label].append(usec - before[0])
                    calls[label].append(n_calls - before[1])
                lo = q.start if q.start is not None else -(2**62)
                hi = q.end if q.end is not None else 2**62

                def inside(vf: int, vu: int | None) -> bool:
                    return lo <= vf < hi if vu is None else vf < hi and vu > lo

                n_in = sum(1 for vf, vu in valid[kind].values() if inside(vf, vu))
                if n_in:
                    got = sum(inside(*valid[kind][h.item.id]) for h in hits if h.item.id in valid[kind])
                    prec[label].append(got / min(K, n_in))
                return elapsed

            for qi in timed[:40]:  # warm up (prototypes, caches, the engine's pages)
                for label in labels:
                    await ask(qi, label)
            if args.slowlog:  # every command logged with its µs (restored by the server's restart)
                await first.client.execute_command("CONFIG", "SET", "slowlog-log-slower-than", "0")
                await first.client.execute_command("CONFIG", "SET", "slowlog-max-len", "1000")
            for label in labels:
                parts[label].clear()
                prec[label].clear()
                server[label].clear()
                calls[label].clear()
                cpu[label].clear()
            for r in range(args.rounds):
                for j, qi in enumerate(timed):
                    shift = (j + r) % len(labels)
                    for label in labels[shift:] + labels[:shift]:
                        lat[label].append(await ask(qi, label))
            if args.profile:
                prof = cProfile.Profile()
                prof.enable()
                for qi in timed:
                    await ask(qi, labels[-1])
                prof.disable()
                pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        finally:
            for store in reversed(list(stores.values())):
                await store.close()
    return {
        "lat": lat,
        "prec": prec,
        "server": server,
        "calls": calls,
        "cpu": cpu,
        "parts": parts,
        "n": len(timed) * args.rounds,
        "events": ne,
    }


async def _server_usec(store: MemoryStore) -> tuple[float, float]:
    """The servers' total µs spent in commands so far, and their calls (INFO commandstats
    of every primary on a cluster, INFO itself left out)."""
    client: Any = store.client
    if hasattr(client, "get_primaries"):
        nodes = [await client.info("commandstats", target_nodes=n) for n in client.get_primaries()]
    else:
        nodes = [await client.info("commandstats")]
    usec = calls = 0.0
    for stats in nodes:
        for k, v in stats.items():
            if str(k).startswith("cmdstat_") and k != "cmdstat_info":
                usec, calls = usec + float(v["usec"]), calls + float(v["calls"])
    return usec, calls


def _by_query(entries: Any) -> dict[str, float]:
    """SLOWLOG entries' µs by the kind of query each was (SLOWLOG and INFO left out)."""
    out: dict[str, float] = {}
    for entry in entries:
        us, argv = (
            float(entry[2]),
            [a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in entry[3]],
        )
        name = argv[0].upper() if argv else ""
        if name in ("SLOWLOG", "INFO", "CONFIG"):
            continue
        text = argv[2] if len(argv) > 2 else ""  # SLOWLOG keeps an argument's first 128 bytes
        knn = "PARAMS" in argv  # a KNN's vector rides in PARAMS; a scan or a count has none
        if name != "FT.SEARCH":
            kind = name.lower()
        elif ":hist:" in argv[1]:
            kind = "history " + ("knn" if knn else "scan")
        elif "state_from" in text:
            kind = "window " + ("knn" if knn else "scan")
        elif "@content:" in text:
            kind = "text"
        elif knn:
            kind = "main knn"
        else:
            kind = "other search"
        out[kind] = out.get(kind, 0.0) + us
    return out


def _p(xs: list[float], q: float) -> float:
    return sorted(xs)[int(q * (len(xs) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "temporal-cache")
    ap.add_argument("--url", default=os.environ.get("VALKEY_URL"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--variants", default="plain,window,ask-history")
    ap.add_argument("--stores", default="bare,subjects", help="bare (no past version), subjects, settled")
    ap.add_argument("--profile", action="store_true", help="profile the last variant")
    ap.add_argument(
        "--slowlog", action="store_true", help="server µs per kind of query (SLOWLOG; standalone)"
    )
    ap.add_argument(
        "--thread", default="", help="write the diary in this thread and scope every recall to it"
    )
    ap.add_argument("--filler", type=int, default=0, help="memories in 100 other threads (random vectors)")
    ap.add_argument(
        "--server",
        action="store_true",
        help="also the servers' µs and calls per recall (INFO commandstats, every primary of a cluster)",
    )
    args = ap.parse_args()
    load = os.getloadavg()[0]
    r = asyncio.run(run(args))
    lat: dict[str, list[float]] = r["lat"]
    plain = {k.split("/")[0]: statistics.median(xs) for k, xs in lat.items() if k.endswith("/plain")}
    print(
        f"{r['n']} recalls per variant, k={K}, {r['events']} events, thread {args.thread or '-'}, "
        f"filler {args.filler}, load {load:.1f}->{os.getloadavg()[0]:.1f}"
    )
    print(
        "| variant | p50 ms | p90 ms | p50 / plain | client CPU ms (mean) | server µs (mean) "
        "| server calls (mean) | precision@5 inside |"
    )
    print("|---|---|---|---|---|---|---|---|")
    fmt: Callable[[float], str] = lambda x: f"{x * 1000:.2f}"  # noqa: E731
    for name, xs in lat.items():
        base = plain.get(name.split("/")[0])
        ratio = "" if base is None else f"{statistics.median(xs) / base:.3f}"
        p = r["prec"][name]
        prec = f"{statistics.fmean(p):.3f}" if p and not name.endswith("/plain") else ""
        cpu = fmt(statistics.fmean(r["cpu"][name]))
        srv = f"{statistics.fmean(r['server'][name]):.0f}" if r["server"][name] else ""
        n_calls = f"{statistics.fmean(r['calls'][name]):.1f}" if r["calls"][name] else ""
        print(
            f"| {name} | {fmt(statistics.median(xs))} | {fmt(_p(xs, 0.9))} | {ratio} | {cpu} | {srv} "
            f"| {n_calls} | {prec} |"
        )
    if args.slowlog:
        kinds = sorted({kind for p in r["parts"].values() for kind in p})
        print("\nserver µs per recall by kind of query (SLOWLOG, mean)")
        print("| variant | " + " | ".join(kinds) + " |")
        print("|---|" + "---|" * len(kinds))
        for name, p in r["parts"].items():
            print(f"| {name} | " + " | ".join(f"{p.get(kind, 0.0) / r['n']:.0f}" for kind in kinds) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
