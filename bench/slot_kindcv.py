"""Rule 3's kind profiles cross-validated BY KIND: how they score pairs of kinds they never saw (issue 26).

The shipped threshold on the profile score (``core.slot_model``) was chosen on kinds the
model was fitted on; the held-out families keep bringing kinds it never saw, where most
of the misses are (``bench/temporal_misses.py``). Here the kinds of
``bench/train_slot_model.statements`` are split into ``--folds`` groups; for each, the
softmax is fitted without that group's kinds, and every pair of one person's statements
(cosine at least the rule's 0.45) with a member of a held-out kind is scored. Pairs:
``update`` (one exclusive kind: should pass), ``many`` (one many-valued kind: should
not), ``other`` (two kinds: should not). Printed per score function and threshold, so a
threshold can be calibrated for kinds the model has not seen.

Score functions (``p``, ``q`` the two profiles, ``e`` the exclusive indicator):
``exclusive``: the shipped ``sum p q e / (|p| |q|)``; ``overlap``: ``p . q / (|p| |q|)``;
``mixed``: overlap times the smaller of ``p . e`` and ``q . e`` (each one's expected
exclusivity). ``--temperature`` divides the logits (above 1 spreads the profiles).

    PYTHONPATH=. .venv/bin/python bench/slot_kindcv.py [--folds 5] [--round 2]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from train_slot_model import PERSONS, fit_kinds, statements  # noqa: E402

MIN_SIM = 0.45
SCORES = ("exclusive", "overlap", "mixed")
Arr = npt.NDArray[np.float32]


def profiles(vecs: Arr, w: Arr, b: Arr, temperature: float) -> Arr:
    z = (vecs @ w + b) / temperature
    z = np.exp(z - z.max(axis=1, keepdims=True))
    out: Arr = (z / z.sum(axis=1, keepdims=True)).astype(np.float32)
    return out


def score(kind: str, p: Arr, q: Arr, e: Arr) -> Arr:
    norms = np.maximum(np.linalg.norm(p, axis=1) * np.linalg.norm(q, axis=1), 1e-12)
    if kind == "exclusive":
        out: Arr = ((p * q) @ e / norms).astype(np.float32)
        return out
    overlap = (p * q).sum(axis=1) / norms
    if kind == "overlap":
        return overlap.astype(np.float32)
    return (overlap * np.minimum(p @ e, q @ e)).astype(np.float32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "temporal-cache")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--round", type=int, default=2)
    ap.add_argument("--persons", type=int, default=PERSONS)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--decay", type=float, default=1e-4)
    ap.add_argument("--temperature", default="1", help="comma-separated")
    ap.add_argument("--max-many", type=float, default=0.02, help="calibration: most many-valued pairs passed")
    ap.add_argument("--max-other", type=float, default=0.05, help="calibration: most two-kind pairs passed")
    args = ap.parse_args()
    rows, vecs = statements(args.cache, args.persons, round=args.round)
    names = sorted({r[2] for r in rows})
    rng = np.random.default_rng(26)
    fold_of = {k: i % args.folds for i, k in enumerate(rng.permutation(names).tolist())}
    kind = np.asarray([r[2] for r in rows])
    person = np.asarray([r[1] for r in rows])
    exclusive = np.asarray([r[3] for r in rows])
    # One person's close pairs (i < j), labelled.
    by_person: dict[int, list[int]] = {}
    for i, p in enumerate(person.tolist()):
        by_person.setdefault(p, []).append(i)
    left, right = [], []
    for idx in by_person.values():
        sims = vecs[idx] @ vecs[idx].T
        a, b = np.nonzero(np.triu(sims >= MIN_SIM, 1))
        left += [idx[x] for x in a.tolist()]
        right += [idx[x] for x in b.tolist()]
    li, ri = np.asarray(left), np.asarray(right)
    same = kind[li] == kind[ri]
    label = np.where(same & exclusive[li], "update", np.where(same, "many", "other"))
    temps = [float(t) for t in args.temperature.split(",")]
    got = {(s, t): np.full(len(li), np.nan, dtype=np.float32) for s in SCORES for t in temps}
    for f in range(args.folds):
        train = np.asarray([fold_of[k] != f for k in kind.tolist()])
        with contextlib.redirect_stdout(io.StringIO()):
            w, b, _, seen = fit_kinds(
                [r for r, t in zip(rows, train.tolist(), strict=True) if t],
                vecs[train],
                epochs=args.epochs,
                lr=args.lr,
                decay=args.decay,
            )
        known = {k: i for i, k in enumerate(seen)}
        e = np.zeros(len(seen), dtype=np.float32)
        for r in rows:
            if r[2] in known:
                e[known[r[2]]] = float(r[3])
        # Pairs with a member of a held-out kind (the other may be of a seen kind).
        held = ~train[li] | ~train[ri]
        for t in temps:
            prof = profiles(vecs, w, b, t)
            for s in SCORES:
                got[s, t][held] = score(s, prof[li[held]], prof[ri[held]], e)
        print(f"fold {f}: {len(names) - len(seen)} kinds held out, {int(held.sum())} pairs", flush=True)
    counts = {lab: int((label == lab).sum()) for lab in ("update", "many", "other")}
    print(f"pairs: {counts}")
    for (s, t), v in got.items():
        print(f"\n[{s}, T={t}] passed at threshold: update / many / other")
        best = None
        for th in np.arange(0.05, 0.96, 0.05):
            rates = {lab: float((v[label == lab] >= th).mean()) for lab in counts}
            print(f"  {th:.2f}: {rates['update']:.3f} / {rates['many']:.3f} / {rates['other']:.3f}")
            if best is None and rates["many"] <= args.max_many and rates["other"] <= args.max_other:
                best = (round(float(th), 2), rates["update"])
        print(f"  calibrated (many <= {args.max_many}, other <= {args.max_other}): {best}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
