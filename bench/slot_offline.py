"""Offline proxy of same-slot supersession on the knowledge-update families (issue 26), no server.

For iterating on rule 3's judge in seconds: each family's statements are one pool; a
question about the present takes its top ``POOL`` statements by cosine (score = cosine;
the store's composite score also weighs recency, so the figures differ from
``temporal_fresh.py``'s, which go through the public API and are the ones reported);
the rule (``near_pairs``, the judge, ``focus_scores``, ``rank_superseded``) orders them.
False supersession: a both-current pair, in the top ``FS_K`` of its own question, called
one slot. Pair level: every pair of one person's statements that passes rules 1-2,
split into true updates, same many-valued kind, and two different kinds.

    PYTHONPATH=. .venv/bin/python bench/slot_offline.py [--sets designed,fresh,fresh3] [--judge ...]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import hashlib
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from temporal_data import (  # noqa: E402
    knowledge_updates,
    knowledge_updates_fresh,
    knowledge_updates_fresh2,
    knowledge_updates_fresh3,
    knowledge_updates_fresh4,
    knowledge_updates_fresh8,
)

from betterdb_memory.core import slot_model  # noqa: E402
from betterdb_memory.core.supersession import (  # noqa: E402
    Candidate,
    Prototypes,
    SupersessionRule,
    focus_scores,
    kind_pairs,
    learned_pairs,
    near_pairs,
    prototype_texts,
    rank_superseded,
)

POOL = 50
FS_K = 10
Matrix = npt.NDArray[np.float32]
Judge = Callable[[Sequence[Candidate], list[tuple[int, int]], str | None], list[tuple[int, int]]]

SETS: dict[str, Callable[[], tuple[knowledge_updates.Dataset, Callable[[int], bool]]]] = {
    "designed": lambda: (knowledge_updates.build(), lambda e: e % 2 == 1),
    "fresh": lambda: (knowledge_updates_fresh.build(), lambda e: True),
    "fresh2": lambda: (knowledge_updates_fresh2.build(), lambda e: True),
    "fresh3": lambda: (knowledge_updates_fresh3.build(), lambda e: True),
    "fresh4": lambda: (knowledge_updates_fresh4.build(), lambda e: True),
    "fresh8": lambda: (knowledge_updates_fresh8.build(), lambda e: True),  # a diagnostic: read freely
}


def embed(texts: Sequence[str], cache: Path) -> Matrix:
    """MiniLM vectors of ``texts`` (one onnxruntime thread: a busy host), cached by content."""
    from betterdb_memory.embedders import OnnxEmbedder
    from betterdb_memory.embedders.onnx import MODEL_ID

    key = hashlib.blake2b("\x00".join([MODEL_ID, *texts]).encode(), digest_size=12).hexdigest()
    path = cache / f"{key}.npy"
    if path.exists():
        out: Matrix = np.load(path)
        return out
    embedder = OnnxEmbedder(batch_size=64, intra_op_threads=1)
    out = np.asarray(asyncio.run(embedder.embed(list(texts))), dtype=np.float32)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


def judges(
    cache: Path, weights: Path | None = None, threshold: float | None = None, overlap: float | None = None
) -> dict[str, Judge]:
    """Rule 3's judges: the prototypes; "shipped" (``kind_pairs`` as the store calls it, with the
    question); "model" (the same with ``weights``, ``threshold`` and the one-value ``overlap``);
    "alone" (the model without the question's rules)."""
    texts, kinds = prototype_texts()
    protos = Prototypes.of(embed(texts, cache), kinds)
    model = slot_model.load(weights) if weights else slot_model.for_model(slot_model.FITTED_MODEL_ID, 384)
    if model is not None and threshold is not None:
        model = dataclasses.replace(model, threshold=threshold)
    rule = SupersessionRule() if overlap is None else SupersessionRule(min_one_value_overlap=overlap)
    out: dict[str, Judge] = {
        "prototypes": lambda c, p, q: kind_pairs(c, p, protos, question=q),
        "shipped": lambda c, p, q: kind_pairs(
            c, p, protos, slot_model.for_model(slot_model.FITTED_MODEL_ID, 384), question=q
        ),
    }
    if model is not None:
        out["model"] = lambda c, p, q: kind_pairs(c, p, protos, model, rule, question=q)
        out["alone"] = lambda c, p, q: learned_pairs(c, p, model)
    return out


def evaluate(name: str, judge: Judge, cache: Path) -> dict[str, Any]:
    ds, which = SETS[name]()
    stmts = ds.statements
    vecs = embed([s.text for s in stmts], cache)
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    qv = np.vstack(
        [embed([c.question for c in ds.chains], cache), embed([p.question for p in ds.pairs], cache)]
    )
    qv = qv / np.linalg.norm(qv, axis=1, keepdims=True)
    pos = {s.id: i for i, s in enumerate(stmts)}

    def cands(top: Sequence[int], q: npt.NDArray[np.float32]) -> list[Candidate]:
        return [
            Candidate(
                stmts[i].id,
                stmts[i].text,
                vecs[i],
                stmts[i].valid_from,
                float(vecs[i] @ q),
                float(vecs[i] @ q),
            )
            for i in top
        ]

    hit = n = 0
    for c, chain in enumerate(ds.chains):
        if not which(chain.entity):
            continue
        q = qv[c]
        top = list(np.argsort(-(vecs @ q))[:POOL])
        cs = cands(top, q)
        kept = judge(cs, near_pairs(cs), chain.question)
        order = rank_superseded(focus_scores(cs, chain.question, kept), [x.valid_from for x in cs], kept)
        n += 1
        hit += top[order[0]] == pos[chain.current.id]
    fs = npairs = 0
    for p, pair in enumerate(ds.pairs):
        if not which(pair.entity):
            continue
        npairs += 1
        q = qv[len(ds.chains) + p]
        top = list(np.argsort(-(vecs @ q))[:FS_K])
        o, nw = pos[pair.older.id], pos[pair.newer.id]
        if o not in top or nw not in top:
            continue
        cs = cands(top, q)
        kept = judge(cs, near_pairs(cs), pair.question)
        fs += (top.index(o), top.index(nw)) in kept
    # Pair level: one person's statements, pairs passing rules 1-2.
    by_person: dict[int, list[int]] = {}
    for i, s in enumerate(stmts):
        if which(s.entity):
            by_person.setdefault(s.entity, []).append(i)
    chain_of = {s.id: (c.entity, c.attribute) for c in ds.chains for s in c.versions}
    many_of = {s.id: (p.entity, p.attribute) for p in ds.pairs for s in (p.older, p.newer)}
    counts = {"update": [0, 0], "many": [0, 0], "other": [0, 0]}
    for idx in by_person.values():
        cs = [Candidate(stmts[i].id, stmts[i].text, vecs[i], stmts[i].valid_from, 0.0) for i in idx]
        near = near_pairs(cs)
        kept = set(judge(cs, near, None))
        for a, b in near:
            ia, ib = stmts[idx[a]].id, stmts[idx[b]].id
            if ia in chain_of and chain_of[ia] == chain_of.get(ib):
                kind = "update"
            elif ia in many_of and many_of[ia] == many_of.get(ib):
                kind = "many"
            else:
                kind = "other"
            counts[kind][0] += (a, b) in kept
            counts[kind][1] += 1
    return {"current_first": (hit, n), "false": (fs, npairs), "pairs": counts}


def cost(name: str, judge: Judge, cache: Path, repeat: int = 3) -> str:
    """CPU microseconds of ``judge`` per question and per pair it judges, over the family's questions."""
    ds, _ = SETS[name]()
    stmts = ds.statements
    vecs = embed([s.text for s in stmts], cache)
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    qv = embed([c.question for c in ds.chains], cache)
    qv = qv / np.linalg.norm(qv, axis=1, keepdims=True)
    work = []
    for c, chain in enumerate(ds.chains):
        top = list(np.argsort(-(vecs @ qv[c]))[:POOL])
        cs = [Candidate(stmts[i].id, stmts[i].text, vecs[i], stmts[i].valid_from, 0.0) for i in top]
        near = near_pairs(cs)
        if near:
            work.append((cs, near, chain.question))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for cs, near, q in work:
            judge(cs, near, q)
        best = min(best, time.process_time() - t0)
    npairs = sum(len(w[1]) for w in work)
    return f"{1e6 * best / len(work):.0f} us per question with a pair, {1e6 * best / npairs:.1f} us per pair"


def pct(k: int, n: int) -> str:
    return f"{100 * k / max(n, 1):.1f}% ({k}/{n})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "temporal-cache")
    ap.add_argument("--sets", default="designed,fresh,fresh3", help="comma-separated: " + ",".join(SETS))
    ap.add_argument(
        "--judge", default="prototypes,shipped", help="comma-separated: prototypes,shipped,model,alone"
    )
    ap.add_argument(
        "--weights", type=Path, default=None, help="a pair model's .npz (default: the shipped one)"
    )
    ap.add_argument("--threshold", type=float, default=None, help="the model's threshold instead of its own")
    ap.add_argument("--overlap", type=float, default=None, help="the one-value rule's overlap threshold")
    ap.add_argument("--cost", action="store_true", help="time the judges instead (CPU, best of 3)")
    args = ap.parse_args()
    js = judges(args.cache, args.weights, args.threshold, args.overlap)
    if args.cost:
        for name in args.sets.split(","):
            for j in args.judge.split(","):
                print(f"{name} [{j}]: {cost(name, js[j], args.cache)}", flush=True)
        return 0
    for name in args.sets.split(","):
        for j in args.judge.split(","):
            r = evaluate(name, js[j], args.cache)
            pairs = ", ".join(f"{k} {pct(*v)}" for k, v in r["pairs"].items())
            print(
                f"{name} [{j}]: current first {pct(*r['current_first'])}; false supersession "
                f"{pct(*r['false'])}; pairs kept: {pairs}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
