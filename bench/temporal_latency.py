"""What a window in the question costs a recall: the same question with and without its time expression.

The diary of ``temporal_data.dated_events`` (856 events, ONNX MiniLM vectors cached by
``bench/temporal_eval.py``'s ``embed``) is written once into one store; then each
question with a time expression is asked with it and without it (the same vector: only
the window differs), on its ``as_of`` day (the parser's clock), alternately, for
``--rounds`` rounds. The two latencies are interleaved so a busy shared host slows both
alike; medians are reported. ``--profile`` prints where a windowed recall spends its time.

    .venv/bin/python bench/temporal_latency.py               # embedded RediSearch
    .venv/bin/python bench/temporal_latency.py --url valkey://localhost:6379
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from temporal_api import K, _no_time, clock  # noqa: E402
from temporal_data import dated_events  # noqa: E402
from temporal_eval import embed  # noqa: E402

from betterdb_memory import MemoryStore  # noqa: E402
from betterdb_memory.core.timewindow import parse_time_window  # noqa: E402
from betterdb_memory.embedders import OnnxEmbedder  # noqa: E402


async def run(args: argparse.Namespace) -> dict[str, Any]:
    ds = dated_events.build()
    windows = [parse_time_window(q.text, as_of=q.as_of) for q in ds.questions]
    rests = [w.query if w is not None else q.text for q, w in zip(ds.questions, windows, strict=True)]
    vecs = embed([e.text for e in ds.events] + [q.text for q in ds.questions] + rests, args.cache)
    ne, nq = len(ds.events), len(ds.questions)
    rvecs = vecs[ne + nq :]
    timed = [i for i, q in enumerate(ds.questions) if q.expression is not None]
    with tempfile.TemporaryDirectory(prefix="temporal-lat-") as data_dir:
        store = await MemoryStore.connect(
            args.url, name=f"tlat-{uuid.uuid4().hex[:8]}", data_dir=data_dir, embedder=OnnxEmbedder()
        )
        try:
            await store.remember_many(
                [
                    {"content": e.text, "valid_from": e.valid_from, "vector": vecs[i].tolist()}
                    for i, e in enumerate(ds.events)
                ]
            )

            async def ask(qi: int, windowed: bool) -> float:
                q = ds.questions[qi]
                text = q.text if windowed else _no_time(q.text, q.expression or "")
                with clock(q.as_of):
                    t0 = time.perf_counter()
                    await store.recall_by_vector(
                        rvecs[qi].tolist(), query=text, k=K, threshold=2.0, reinforce=False
                    )
                    return time.perf_counter() - t0

            for qi in timed[:40]:  # warm up (prototypes, caches, the engine's pages)
                await ask(qi, True)
                await ask(qi, False)
            lw: list[float] = []
            lp: list[float] = []
            for r in range(args.rounds):
                for qi in timed:
                    first = (qi + r) % 2 == 0  # alternate which of the two goes first
                    for windowed in (first, not first):
                        (lw if windowed else lp).append(await ask(qi, windowed))
            if args.profile:
                prof = cProfile.Profile()
                prof.enable()
                for qi in timed:
                    await ask(qi, True)
                prof.disable()
                pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        finally:
            await store.close()
    return {
        "window_p50": statistics.median(lw) * 1000,
        "plain_p50": statistics.median(lp) * 1000,
        "window_p90": sorted(lw)[int(0.9 * (len(lw) - 1))] * 1000,
        "plain_p90": sorted(lp)[int(0.9 * (len(lp) - 1))] * 1000,
        "n": len(lw),
        "events": ne,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "temporal-cache")
    ap.add_argument("--url", default=os.environ.get("VALKEY_URL"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    r = asyncio.run(run(args))
    print(
        f"{r['n']} recalls each, k={K}, {r['events']} events, load {os.getloadavg()[0]:.1f}: "
        f"with window p50 {r['window_p50']:.2f} ms (p90 {r['window_p90']:.2f}), "
        f"without p50 {r['plain_p50']:.2f} ms (p90 {r['plain_p90']:.2f}), "
        f"ratio {r['window_p50'] / r['plain_p50']:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
