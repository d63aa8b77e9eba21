"""Why a question about the present misses its current statement: each miss classified by stage (issue 26).

Through the public API (``recall_by_vector`` on a real engine, as ``bench/temporal_fresh.py``),
with the recall's time step watched: the candidates it ranked, the pairs rules 1-2 and
rule 3 kept, and whether the focus step re-ordered. Each missed question (the current
statement not the top hit) is put in one stage:

* ``not present``: the question was not taken for one about the present (a window parsed);
* ``not retrieved``: the current statement is not among the candidates;
* an older version of the same chain is on top, and the pair (top, current) fails
  ``rule 1`` (leading names), ``rule 2`` (similarity) or ``rule 3`` (the kind judge:
  ``profile`` or ``veto``), or passes them all (``ranking after detection``);
* another slot is on top (``other slot``): ``promoted`` (it was lifted by its own
  versions' supersession), ``focus`` (the focus step put it there) or ``base`` (it was
  first before the rule and the rule left it there); ``+pair`` when a pair of the
  asked chain was detected, ``-pair`` when not.

Totals only for a held-out family (``--totals-only``): its misses are not printed.

    PYTHONPATH=. .venv/bin/python bench/temporal_misses.py --only fresh2 [--show N]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import temporal_api  # noqa: E402
from temporal_data import (  # noqa: E402
    knowledge_updates,
    knowledge_updates_fresh,
    knowledge_updates_fresh2,
    knowledge_updates_fresh3,
    knowledge_updates_fresh4,
)
from temporal_eval import embed, held_out  # noqa: E402

from betterdb_memory.core import slot_model  # noqa: E402
from betterdb_memory.core.names import leading_name, same_name  # noqa: E402
from betterdb_memory.core.supersession import SupersessionRule  # noqa: E402
from betterdb_memory.tiers import time_recall  # noqa: E402

SETS: dict[str, Any] = {
    "designed": lambda: (knowledge_updates.build(), held_out),
    "fresh": lambda: (knowledge_updates_fresh.build(), lambda e: True),
    "fresh2": lambda: (knowledge_updates_fresh2.build(), lambda e: True),
    "fresh3": lambda: (knowledge_updates_fresh3.build(), lambda e: True),
    "fresh4": lambda: (knowledge_updates_fresh4.build(), lambda e: True),
}


class Watch:
    """What the last recall's time step saw (patched into ``time_recall``)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.present: bool | None = None
        self.candidates: list[str] = []
        self.order_in: list[tuple[str, float]] = []
        self.order_out: list[tuple[str, float]] = []
        self.kept: list[tuple[str, str]] = []
        self.focused = False


def install(w: Watch) -> None:
    tr = time_recall.TimeRecall
    reorders, order = tr.reorders, tr.order
    kind_pairs, focus = time_recall.kind_pairs, time_recall.focus_scores

    def reorders_(self: Any, plan: Any, candidates: Any, query: Any) -> Any:
        w.present = plan.present
        w.candidates = [item.content for item, _ in candidates]
        return reorders(self, plan, candidates, query)

    async def order_(self: Any, hits: Any, plan: Any, **kw: Any) -> Any:
        w.order_in = [(h.item.content, h.score) for h in hits]
        out = await order(self, hits, plan, **kw)
        w.order_out = [(h.item.content, h.score) for h in out]
        return out

    def kind_pairs_(cands: Any, pairs: Any, *a: Any, **kw: Any) -> Any:
        kept = kind_pairs(cands, pairs, *a, **kw)
        w.kept = [(cands[o].text, cands[n].text) for o, n in kept]
        return kept

    def focus_(cands: Any, question: str, pairs: Any) -> Any:
        out = focus(cands, question, pairs)
        w.focused = out != [c.score for c in cands]
        return out

    tr.reorders = reorders_  # type: ignore[method-assign]
    tr.order = order_  # type: ignore[method-assign]
    time_recall.kind_pairs = kind_pairs_  # type: ignore[assignment]
    time_recall.focus_scores = focus_  # type: ignore[assignment]


def classify(w: Watch, chain: Any, top: str, vec: dict[str, np.ndarray[Any, Any]], model: Any) -> str:
    current = chain.current.text
    versions = {s.text for s in chain.versions}
    if not w.present:
        return "not present"
    if current not in w.candidates:
        return "not retrieved"
    asked = {frozenset(p) for p in w.kept if p[0] in versions and p[1] in versions}
    tag = "+pair" if asked else "-pair"
    if top in versions:
        a, b = leading_name(top), leading_name(current)
        if not (a and b and same_name(a, b)):
            return "rule 1 (leading names)"
        u, v = vec[top], vec[current]
        if float(u @ v) < SupersessionRule().min_similarity:
            return "rule 2 (similarity)"
        if model is not None:
            pu, pv = model.kinds.profiles(np.stack([u, v]))
            score = model.kinds.scores(np.stack([pu, pv]), np.array([0]), np.array([1]))[0]
            if score < model.threshold:
                return "rule 3 (profile)"
            if (
                model.veto is not None
                and model.veto.probabilities(u[None], v[None])[0] < model.veto.threshold
            ):
                return "rule 3 (veto)"
        return "ranking after detection"
    before = dict(w.order_in)
    after = dict(w.order_out)
    pre_top = w.order_in[0][0] if w.order_in else (w.candidates[0] if w.candidates else "")
    if top in before and after.get(top, 0.0) > before[top] + 1e-12:
        return f"other slot: promoted {tag}"
    if pre_top != top and w.focused:
        return f"other slot: focus {tag}"
    return f"other slot: base {tag}"


async def run(url: str | None, name: str, show: int, totals_only: bool, data: Any) -> None:
    ds, which, vecs, qvecs = data
    stmts = ds.statements
    vec = {s.text: vecs[i] for i, s in enumerate(stmts)}
    emb = "onnx:all-MiniLM-L6-v2-int8"
    model = slot_model.for_model(emb, vecs.shape[1])
    w = Watch()
    install(w)
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, list[str]] = collections.defaultdict(list)
    n = 0
    with tempfile.TemporaryDirectory(prefix="temporal-x-") as data_dir:
        store = await temporal_api._store(url, data_dir)
        try:
            for lo in range(0, len(stmts), 500):
                await store.remember_many(
                    [
                        {"content": s.text, "valid_from": s.valid_from, "vector": vecs[i].tolist()}
                        for i, s in enumerate(stmts[lo : lo + 500], start=lo)
                    ]
                )
            for q, chain in enumerate(ds.chains):
                if not which(chain.entity):
                    continue
                n += 1
                w.reset()
                hits = await store.recall_by_vector(
                    qvecs[q].tolist(), query=chain.question, k=1, threshold=2.0, reinforce=False
                )
                top = hits[0].item.content if hits else ""
                if top == chain.current.text:
                    continue
                stage = classify(w, chain, top, vec, model)
                counts[stage] += 1
                if len(examples[stage]) < show:
                    vs = " | ".join(s.text for s in chain.versions)
                    examples[stage].append(f"Q: {chain.question}\n    top: {top}\n    chain: {vs}")
        finally:
            await store.close()
    missed = sum(counts.values())
    print(f"{name}: {n} questions, {missed} missed ({100 * (n - missed) / n:.1f}% current first)")
    for stage, c in counts.most_common():
        print(f"  {c:4d}  {stage}")
        if not totals_only:
            for ex in examples[stage]:
                print("   ", ex)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="fresh2,fresh3")
    ap.add_argument("--url", default=None)
    ap.add_argument("--show", type=int, default=0, help="examples per stage")
    ap.add_argument("--totals-only", action="store_true", help="no examples (a held-out family)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "temporal-cache")
    args = ap.parse_args()
    for name in args.only.split(","):
        totals = args.totals_only or name == "fresh4"
        ds, which = SETS[name]()
        vecs = embed([s.text for s in ds.statements], args.cache)
        qvecs = embed([c.question for c in ds.chains], args.cache)
        asyncio.run(run(args.url, name, args.show, totals, (ds, which, vecs, qvecs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
