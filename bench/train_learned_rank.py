"""Fit ``betterdb_memory.core.learned_rank``'s constants on LoCoMo, cross-validated by conversation.

    .venv/bin/python bench/quality_lab.py capture        # once: the captured pools (~10 min on 2 busy cores)
    .venv/bin/python bench/train_learned_rank.py         # held-out figures, the fitted constants
    .venv/bin/python bench/train_learned_rank.py --write # ... and rewrite them in the module

The candidates are the default recall's (KNN 50 + the full-text hits, replayed by
``bench/quality_lab.py``, which reproduces ``recall()``'s figures exactly); the
features are the module's own ``features`` (what is fitted is what runs). The model:
a linear pairwise logistic loss (each answer turn against each other candidate of
the same question), L2 ``--l2``, Newton's method from zero: deterministic, no
sampling, so the constants are reproducible. Held-out figures: each conversation
scored by a model fitted on the nine others (leave one conversation out), the gate
as shipped (it reads the KNN distances only, so the ranker does not move it). The
constants shipped are fitted on all ten; the calibration ``(a, b)`` maps the held-out
scores onto ``HybridRanker``'s fused similarity scale (least squares on logits), so
the composite score's weights keep their balance.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import quality_lab as L

from betterdb_memory.core import learned_rank as LR
from betterdb_memory.core.models import MemoryItem

MODULE = Path(LR.__file__)
FloatArray = npt.NDArray[np.float64]
# What relative expressions in a question ("last year") count from: the live bench writes the
# turns today, so a recall's candidates were created "now" (LearnedRanker's as_of is the
# latest created_at of its candidates). A fixed instant keeps the fit reproducible.
AS_OF = int(dt.datetime(2026, 12, 1, tzinfo=dt.UTC).timestamp() * 1000)


@functools.lru_cache(maxsize=512)
def session_ms(date: str) -> int:
    """A LoCoMo session date ("1:56 pm on 8 May, 2023") as epoch ms, UTC: the turns' ``valid_from``."""
    when = dt.datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def build(
    lab: L.Lab, ps: Sequence[L.Pool]
) -> tuple[FloatArray, npt.NDArray[np.bool_], npt.NDArray[np.int64], list[list[int]]]:
    """Feature rows (the module's), labels, question of each row, and each pool's turns."""
    rows: list[list[float]] = []
    label: list[bool] = []
    group: list[int] = []
    turns = lab.data.turns
    for qi, (q, p) in enumerate(zip(lab.data.questions, ps, strict=True)):
        ts = [turns[j] for j in p.turns]
        feats = LR.features(
            q.text,
            [t.content for t in ts],
            [float(d) for d in p.distance],
            [t.key for t in ts],
            [("", "", t.conv, t.position, t.key) for t in ts],
            [session_ms(t.date) for t in ts],
            AS_OF,
        )
        rows += feats
        label += [t.key in q.evidence for t in ts]
        group += [qi] * len(ts)
    return np.array(rows), np.array(label), np.array(group), [p.turns for p in ps]


def fit_pairwise(
    x: FloatArray, label: npt.NDArray[np.bool_], group: npt.NDArray[np.int64], l2: float
) -> FloatArray:
    """Linear RankNet: logistic loss on (answer - other) differences within a question; Newton from zero."""
    pos: list[int] = []
    neg: list[int] = []
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    ends = np.r_[starts[1:], len(group)]
    for s, e in zip(starts, ends, strict=True):
        ps = np.flatnonzero(label[s:e]) + s
        ns = np.flatnonzero(~label[s:e]) + s
        for p in ps:
            pos += [int(p)] * len(ns)
            neg += ns.tolist()
    sd = x.std(axis=0)
    sd[sd == 0] = 1.0
    d = (x[pos] - x[neg]) / sd
    w = np.zeros(d.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(d @ w)))
        grad = d.T @ (p - 1.0) + l2 * w
        h = (d * (p * (1 - p))[:, None]).T @ d + l2 * np.eye(len(w))
        step = np.linalg.solve(h, grad)
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    out: FloatArray = w / sd
    return out


def calibrate(score: FloatArray, fused: FloatArray) -> tuple[float, float]:
    """``(a, b)`` with ``sigmoid(a * score + b)`` nearest HybridRanker's fused similarity (least squares on logits).

    The composite score weighs similarity against recency and importance with weights
    chosen for that scale; a probability of answering would be another scale.
    """
    f = np.clip(fused, 1e-6, 1 - 1e-6)
    a, b = np.polyfit(score, np.log(f / (1 - f)), 1)
    return float(a), float(b)


def ranked(
    lab: L.Lab,
    score: FloatArray,
    group: npt.NDArray[np.int64],
    dense: FloatArray,
    turns: list[list[int]],
    closed: Sequence[bool],
) -> list[list[str]]:
    out: list[list[str]] = []
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    for qi, s in enumerate(starts):
        if closed[qi]:
            out.append([])
            continue
        keys = [lab.data.turns[j].key for j in turns[qi]]
        idx = sorted(range(len(keys)), key=lambda i: (-score[s + i], -dense[s + i], keys[i]))
        out.append([keys[i] for i in idx[: L.TOP]])
    return out


def cost(
    lab: L.Lab, weights: Sequence[float], calibration: tuple[float, float], size: int = 100
) -> tuple[float, float]:
    """Median ms of ``LearnedRanker.rerank`` and of ``HybridRanker.rerank`` at ``size`` candidates (warm caches)."""
    from betterdb_memory.core.ranking import HybridRanker

    ps = L.pools(lab, knn=size, text=0)[:200]
    learned = LR.LearnedRanker(weights=weights, calibration=calibration)
    hybrid = HybridRanker()
    now = 0
    out = []
    for ranker in (learned, hybrid):
        times = []
        for rep in range(2):
            for qi, p in enumerate(ps):
                cands = [
                    (
                        MemoryItem(
                            lab.data.turns[j].key,
                            lab.data.turns[j].content,
                            0.5,
                            now + j,
                            now + j,
                            0,
                            thread_id=lab.data.turns[j].conv,
                        ),
                        float(d),
                    )
                    for j, d in zip(p.turns, p.distance, strict=True)
                ]
                t0 = time.perf_counter()
                ranker.rerank(lab.data.questions[qi].text, cands)
                if rep:
                    times.append((time.perf_counter() - t0) * 1000)
        out.append(float(np.median(times)))
    return out[0], out[1]


def write(weights: Sequence[float], calibration: tuple[float, float], fitted: str) -> None:
    text = MODULE.read_text("utf-8")
    block = (
        "# -- fitted (bench/train_learned_rank.py --write rewrites this block) ---------------------------\n"
        "FEATURES: tuple[str, ...] = (\n" + "".join(f'    "{n}",\n' for n in LR.FEATURES) + ")\n"
        "WEIGHTS: tuple[float, ...] = (\n"
        + "".join(f"    {w!r},  # {n}\n" for w, n in zip(weights, LR.FEATURES, strict=True))
        + ")\n"
        "# similarity = 1 / (1 + exp(-(a * score + b)))\n"
        f"CALIBRATION: tuple[float, float] = ({calibration[0]!r}, {calibration[1]!r})\n"
        f"FITTED = {json.dumps(fitted)}\n"
        "# -- end fitted"
    )
    new = re.sub(r"# -- fitted \(bench.*?# -- end fitted", lambda _: block, text, count=1, flags=re.S)
    MODULE.write_text(new, "utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--write", action="store_true", help="rewrite the constants in the module")
    parser.add_argument("--data", type=Path, default=L.DEFAULT_DATA)
    parser.add_argument("--cache", type=Path, default=L.DEFAULT_CACHE)
    parser.add_argument(
        "--said",
        choices=("said", "said_rule"),
        default=None,
        help='the dense side embeds turns as `Speaker said, "text"`: the lab\'s text (caption as "and shared") '
        "or a rule on the stored content (quality_lab_experiments.said_text), not their content",
    )
    parser.add_argument(
        "--drop", action="append", default=[], help="a feature to leave out (weight 0; repeatable)"
    )
    args = parser.parse_args(argv)
    if not args.data.exists():
        print(f"skipped: no LoCoMo data at {args.data}", file=sys.stderr)
        return 0
    lab = L.open_lab(args.data, args.cache)
    if args.said:
        from quality_lab_experiments import context_texts

        ps = L.pools(lab, lab.vectors(f"turns-{args.said}", context_texts(lab, args.said)))
    else:
        ps = L.pools(lab)
    x, label, group, turns = build(lab, ps)
    for name in args.drop:
        x[:, LR.FEATURES.index(name)] = 0.0
    conv = np.array([lab.data.convs.index(lab.data.questions[g].conv) for g in group])
    held = np.zeros(len(label))
    folds: dict[str, list[float]] = {}
    for c in np.unique(conv):
        w = fit_pairwise(x[conv != c], label[conv != c], group[conv != c], args.l2)
        held[conv == c] = x[conv == c] @ w
        folds[lab.data.convs[int(c)]] = w.tolist()
    weights = fit_pairwise(x, label, group, args.l2)
    from quality_lab_experiments import gate_closed

    closed = gate_closed(lab, ps)
    dense = x[:, LR.FEATURES.index("dense")]
    sim = 1.0 - (1.0 - dense) / 2.0
    today = -np.log(np.maximum(1.0 - sim, 1e-9)) + 4.0 * x[:, LR.FEATURES.index("lexical")]
    calibration = calibrate(held, 1.0 - np.exp(-today))  # today's fused similarity, 1 - (1 - sim) e^(-4 lex)
    rows = {
        "today's fusion (HybridRanker, alpha 4), gate as shipped": ranked(
            lab, today, group, dense, turns, closed
        ),
        "learned (held-out folds), gate as shipped": ranked(lab, held, group, dense, turns, closed),
        "learned (held-out folds), gate off": ranked(lab, held, group, dense, turns, [False] * len(ps)),
    }
    print(L.HEADER)
    sc = {}
    for name, r in rows.items():
        sc[name] = L.scores(lab, r)
        print(sc[name].row(name))
    # Per conversation (held out): does the gain hold on each, not only on average?
    convs = lab.data.convs
    cells = []
    for c in convs:
        sel = [i for i, q in enumerate(lab.data.questions) if q.conv == c]
        t_, l_ = (sc[n] for n in list(rows)[:2])
        h_t = np.mean([t_.ranks[i] is not None and t_.ranks[i] < 5 for i in sel])
        h_l = np.mean([l_.ranks[i] is not None and l_.ranks[i] < 5 for i in sel])
        cells.append(f"{c} {h_t:.3f} -> {h_l:.3f}")
    print("\nhit@5 per conversation, HybridRanker -> learned (held out): " + "; ".join(cells))
    ms_learned, ms_hybrid = cost(lab, weights, calibration)
    learned = sc["learned (held-out folds), gate as shipped"]
    fitted = (
        f"pairwise logistic, L2 {args.l2:g}, on LoCoMo categories 1-4 ({len(lab.data.questions)} questions, "
        f"10 conversations, KNN 50 + full-text pools of the shipped MiniLM); held out by conversation: "
        f"hit@1 {learned.hit(1):.3f}, hit@5 {learned.hit(5):.3f}, hit@10 {learned.hit(10):.3f}, MRR@10 {learned.mrr():.3f} "
        f"(HybridRanker: hit@5 {sc[next(iter(rows))].hit(5):.3f}, MRR@10 {sc[next(iter(rows))].mrr():.3f}); "
        "bench/train_learned_rank.py --write"
    )
    print()
    print("weights:", ", ".join(f"{n} {w:+.4f}" for n, w in zip(LR.FEATURES, weights, strict=True)))
    print(f"calibration a {calibration[0]:.4f}, b {calibration[1]:.4f}")
    print(
        f"rerank at 100 candidates, median (pure python, warm caches): learned {ms_learned:.3f} ms, HybridRanker {ms_hybrid:.3f} ms"
    )
    print(f"FITTED = {fitted!r}")
    if not args.drop:
        # Each conversation's held-out weights, for bench/quality.py's held-out row through recall().
        # Derived from LoCoMo: kept beside the cached vectors, outside the repository.
        path = args.cache / (f"folds-{args.said}.json" if args.said else "folds.json")
        path.write_text(json.dumps({"features": list(LR.FEATURES), "weights": folds}), "utf-8")
        print(f"wrote {path}", file=sys.stderr)
    if args.write:
        write(weights.tolist(), calibration, fitted)
        print(f"wrote {MODULE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
