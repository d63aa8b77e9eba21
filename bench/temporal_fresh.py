"""Issue 26's implicit updates on the fresh wording family, through the public API (held-out check).

``temporal_data.knowledge_updates_fresh`` is wording nobody tuned on; every person of it
is held out. The designed-on set's odd-numbered people (``temporal_eval.held_out``) are
run in the same process, so the two rows compare on one machine load. Figures:
current-first (the current version is the top hit of the question about the present)
and false supersession (a both-current pair's older statement marked superseded by the
newer), with the rule, without its focus step, and without the rule.

    PYTHONPATH=. .venv/bin/python bench/temporal_fresh.py [--misses FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import temporal_api  # noqa: E402
from temporal_data import (  # noqa: E402
    knowledge_updates,
    knowledge_updates_fresh,
    knowledge_updates_fresh2,
    knowledge_updates_fresh3,
    knowledge_updates_fresh4,
    knowledge_updates_fresh5,
    knowledge_updates_fresh6,
    knowledge_updates_fresh7,
    knowledge_updates_fresh8,
)
from temporal_eval import embed, held_out, pct  # noqa: E402

from betterdb_memory.tiers import time_recall  # noqa: E402


async def _misses(
    url: str | None, ds: knowledge_updates.Dataset, which: Any, cache: Path
) -> list[dict[str, Any]]:
    """Per missed question: the question, the current text, and the top five (for analyses)."""
    stmts = ds.statements
    vecs = embed([s.text for s in stmts], cache)
    qvecs = embed([c.question for c in ds.chains], cache)
    out = []
    with tempfile.TemporaryDirectory(prefix="temporal-m-") as data_dir:
        store = await temporal_api._store(url, data_dir)
        try:
            await store.remember_many(
                [
                    {"content": s.text, "valid_from": s.valid_from, "vector": vecs[i].tolist()}
                    for i, s in enumerate(stmts)
                ]
            )
            for q, chain in enumerate(ds.chains):
                if not which(chain.entity):
                    continue
                hits = await store.recall_by_vector(
                    qvecs[q].tolist(), query=chain.question, k=5, threshold=2.0, reinforce=False
                )
                if hits and hits[0].item.content == chain.current.text:
                    continue
                out.append(
                    {
                        "q": chain.question,
                        "attr": chain.attribute,
                        "current": chain.current.text,
                        "versions": [s.text for s in chain.versions],
                        "top": [h.item.content for h in hits],
                    }
                )
        finally:
            await store.close()
    return out


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def prototypes_only() -> Iterator[None]:
    """Rule 3 by the hand-written prototypes even for the embedder the learned model was fitted on."""
    saved = time_recall.for_model
    time_recall.for_model = lambda model_id, dimensions: None
    try:
        yield
    finally:
        time_recall.for_model = saved


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "temporal-cache")
    ap.add_argument("--url", default=None)
    ap.add_argument("--misses", type=Path, default=None, help="write the missed questions here (JSON)")
    ap.add_argument("--only", default=None, help="run only the sets whose label contains this")
    ap.add_argument(
        "--judge",
        choices=("shipped", "prototypes", "both"),
        default="shipped",
        help="rule 3 by what the store picks (the learned model for MiniLM), the prototypes, or both in turn",
    )
    ap.add_argument("--train", action="store_true", help="also the designed-on set's training half")
    ap.add_argument("--quick", action="store_true", help="the rule's row and false supersession only")
    args = ap.parse_args()
    sets = {
        "designed-on set, odd people (held out)": (knowledge_updates.build(), held_out),
        "fresh wording family (all held out)": (knowledge_updates_fresh.build(), lambda e: True),
        "second fresh family (clean, all held out)": (knowledge_updates_fresh2.build(), lambda e: True),
        "third fresh family (clean, pair model's before/after)": (
            knowledge_updates_fresh3.build(),
            lambda e: True,
        ),
        "fourth fresh family (clean until round kindcv)": (
            knowledge_updates_fresh4.build(),
            lambda e: True,
        ),
        "fifth fresh family (round kindcv's held-out check; not tuned on)": (
            knowledge_updates_fresh5.build(),
            lambda e: True,
        ),
        "sixth fresh family (round questionslot's held-out check; not tuned on)": (
            knowledge_updates_fresh6.build(),
            lambda e: True,
        ),
        "seventh fresh family (clean, round questionform's held-out check)": (
            knowledge_updates_fresh7.build(),
            lambda e: True,
        ),
        "eighth fresh family (a diagnostic of questions naming no noun; read miss by miss)": (
            knowledge_updates_fresh8.build(),
            lambda e: True,
        ),
    }
    if args.train:
        sets["designed-on set, even people (training half)"] = (
            knowledge_updates.build(),
            lambda e: e % 2 == 0,
        )
    judges = {"shipped": [("", _nothing)], "prototypes": [(" [prototypes]", prototypes_only)]}
    judges["both"] = [(" [prototypes]", prototypes_only), (" [shipped]", _nothing)]
    dumped: dict[str, Any] = {}
    t0 = time.process_time()
    for label, (ds, which) in sets.items():
        if args.only is not None and args.only not in label:
            continue
        vecs = embed([s.text for s in ds.statements], args.cache)
        qvecs = embed([c.question for c in ds.chains], args.cache)
        for tag, judge in judges[args.judge]:
            with judge():
                r = asyncio.run(temporal_api.part_a(args.url, ds, vecs, qvecs, which, quick=args.quick))
            print(
                f"{label}{tag}: current first {pct(*r['rule'])} (without focus {pct(*r['nofocus'])}, "
                f"rule off {pct(*r['plain'])}); false supersession {pct(*r['false'])}",
                flush=True,
            )
        if args.misses is not None:
            dumped[label] = asyncio.run(_misses(args.url, ds, which, args.cache))
    print(f"cpu {time.process_time() - t0:.1f}s, load {os.getloadavg()[0]:.1f}")
    if args.misses is not None:
        args.misses.write_text(json.dumps(dumped, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
