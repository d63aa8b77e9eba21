"""LoCoMo questions whose text holds an exact time window, asked with two variants of the window's queries.

``bench/quality.py``'s held-out row (``recall_by_vector(vector, query=question, k=10,
thread_id=conversation)`` on stores whose ``LearnedRanker`` was fitted without that
conversation), restricted to the questions ``core.time_recall.time_plan`` gives an
exact window (212 of 1,540): the only ones a change to the window's queries can move.
Each question is asked in every variant back to back on the same stores; hit@5,
MRR@10, how many rankings are identical to the first variant, and how many recalls come
back empty when the question is asked of another conversation (off-topic: the gate
should close) are printed. Faster
than the whole ``bench/quality.py`` run (one store, no other rows) and more direct:
the other 1,328 questions are not asked because they cannot change.

Variants: ``shipped`` (the library as it is), ``full-pool`` (the recall's own KNN asks
for its whole pool beside the window's query, as before ``core.time_recall.main_k``).

    .venv/bin/python bench/window_quality.py [--variants shipped,full-pool]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import valkey.asyncio as avalkey  # noqa: E402
from quality import DEFAULT_DATA, TOP, dia, embed_all, first_hit, held_out_stores, load, populate  # noqa: E402
from temporal_latency import variant  # noqa: E402

from betterdb_memory.core.time_recall import time_plan  # noqa: E402
from betterdb_memory.embedders import OnnxEmbedder  # noqa: E402
from betterdb_memory.server import EmbeddedServer  # noqa: E402


async def run(args: argparse.Namespace) -> int:
    turns, questions = load(args.data, None)
    windowed = [i for i, q in enumerate(questions) if time_plan(q.text).filters]
    embedder = OnnxEmbedder(batch_size=64)
    cache = Path(tempfile.gettempdir()) / "quality-cache" / "emb"
    tvecs, _ = await embed_all(embedder, [t.text for t in turns], cache)
    qvecs, _ = await embed_all(embedder, [q.text for q in questions], cache)
    names = args.variants.split(",")
    server = EmbeddedServer(persistence=False)
    await asyncio.to_thread(server.start)
    client = avalkey.Valkey.from_url(server.url, decode_responses=False)
    run_id = uuid.uuid4().hex[:8]
    ranks: dict[str, list[int | None]] = {n: [] for n in names}
    ids: dict[str, list[list[str]]] = {n: [] for n in names}
    empty: dict[str, int] = {n: 0 for n in names}  # off-topic: asked of another conversation
    convs = sorted({q.conv for q in questions})
    try:
        store, _ = await populate(client, embedder, turns, tvecs, run_id)
        stores = held_out_stores(args.folds, client, embedder, run_id)
        if not stores:
            print(f"no held-out weights at {args.folds}", file=sys.stderr)
            return 2
        for qi in windowed:
            q = questions[qi]
            for name in names:
                with variant("window" if name == "shipped" else name):
                    hits = await stores[q.conv].recall_by_vector(
                        qvecs[qi], query=q.text, k=TOP, thread_id=q.conv, reinforce=False
                    )
                ranked = dia([h.item for h in hits])
                ranks[name].append(first_hit(ranked, q.evidence))
                ids[name].append([h.item.id for h in hits])
                other = convs[(convs.index(q.conv) + 1) % len(convs)]
                with variant("window" if name == "shipped" else name):
                    off = await stores[q.conv].recall_by_vector(
                        qvecs[qi], query=q.text, k=TOP, thread_id=other, reinforce=False
                    )
                empty[name] += not off
        for s in [store, *stores.values()]:
            await s.close()
    finally:
        await client.aclose()
        await asyncio.to_thread(server.stop)
    print(f"{len(windowed)} of {len(questions)} questions hold an exact window; k={TOP}, held out")
    print("| variant | hit@5 | MRR@10 | rankings identical to the first | off-topic empty |")
    print("|---|---|---|---|---|")
    for n in names:
        r = ranks[n]
        hit5 = statistics.fmean(1.0 if x is not None and x < 5 else 0.0 for x in r)
        mrr = statistics.fmean(0.0 if x is None else 1.0 / (x + 1) for x in r)
        same = sum(a == b for a, b in zip(ids[n], ids[names[0]], strict=True))
        print(f"| {n} | {hit5:.3f} | {mrr:.3f} | {same}/{len(r)} | {empty[n]}/{len(r)} |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--variants", default="shipped,full-pool")
    ap.add_argument(
        "--folds", type=Path, default=Path(tempfile.gettempdir()) / "quality-cache" / "lab" / "folds.json"
    )
    args = ap.parse_args()
    if not args.data.exists():
        print(f"skipped: LoCoMo data not found at {args.data}", file=sys.stderr)
        return 0
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())
