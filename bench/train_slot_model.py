"""Fit the learned same-slot classifier (``betterdb_memory/core/slot_model.py``), issue 26.

Examples: pairs of one person's statements whose vectors pass the rule's cheap half
(cosine at least ``MIN_SIM``; the same leading name is given, both are one person's),
from ``temporal_data.slot_training`` (generated for this, many kinds and wordings) and
the even-numbered people of ``temporal_data.knowledge_updates`` (the designed-on set's
training half). Label 1: the same exclusive kind (the newer replaces the older); 0: the
same many-valued kind, or two different kinds. Neither fresh family is read here.

Model: logistic regression on ``[u*v, u*u + v*v, u + v]`` (symmetric in the pair; see
``core.slot_model``), L2-penalised, Newton's method from zero (deterministic). The
threshold is chosen on people held out of the fit (a person-level split of both
sources) as the lowest probability whose false positives among many-valued same-kind
pairs stay at most ``--max-fs`` (and, with ``--max-other``, among pairs of two kinds);
then the model is refitted on everyone. The store uses it as a veto of the prototypes'
pairs (``core.supersession.kind_pairs``): a low threshold, for what it is sure of.

    PYTHONPATH=. .venv/bin/python bench/train_slot_model.py [--write]
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

from temporal_data import knowledge_updates, slot_training  # noqa: E402
from temporal_eval import embed  # noqa: E402

from betterdb_memory.core.slot_model import pair_features  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TARGET = REPO / "betterdb_memory" / "core" / "slot_model.py"
MIN_SIM = 0.40  # a little below the rule's 0.45: the model sees every pair the rule asks about
Arr = npt.NDArray[np.float64]


def examples(cache: Path) -> tuple[Arr, Arr, Arr, Arr, Arr]:
    """(features, labels, person ids, same-kind-many flags, source) of every close pair."""
    train = slot_training.build()
    ku = knowledge_updates.build()
    rows: list[tuple[str, int, str, bool]] = [(s.text, s.person, s.kind, s.exclusive) for s in train]
    for s in ku.statements:
        if s.entity % 2 == 0:  # the training half (temporal_eval.held_out is the odd half)
            rows.append((s.text, 100_000 + s.entity, s.attribute, s.attribute in knowledge_updates.EXCLUSIVE))
    vecs = embed([r[0] for r in rows], cache).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    by_person: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        by_person.setdefault(r[1], []).append(i)
    a_idx, b_idx, y, person, many = [], [], [], [], []
    for p, idx in by_person.items():
        for x in range(len(idx)):
            for z in range(x + 1, len(idx)):
                i, j = idx[x], idx[z]
                if float(vecs[i] @ vecs[j]) < MIN_SIM:
                    continue
                same = rows[i][2] == rows[j][2]
                a_idx.append(i)
                b_idx.append(j)
                y.append(float(same and rows[i][3]))
                person.append(p)
                many.append(same and not rows[i][3])
    feats = pair_features(vecs[a_idx], vecs[b_idx]).astype(np.float64)
    src = np.asarray([p >= 100_000 for p in person], dtype=np.float64)
    return feats, np.asarray(y), np.asarray(person), np.asarray(many, dtype=np.float64), src


def fit(x: Arr, y: Arr, l2: float) -> Arr:
    """Weights (last one the bias) by Newton's method on the L2-penalised logistic loss."""
    xb = np.hstack([x, np.ones((len(x), 1))]).astype(np.float32)
    w = np.zeros(xb.shape[1])
    pen = np.full(xb.shape[1], l2)
    pen[-1] = 0.0
    for _ in range(12):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + pen * w
        hess = (xb * (p * (1 - p))[:, None].astype(np.float32)).T @ xb + np.diag(pen)
        step = np.linalg.solve(hess.astype(np.float64), grad)
        w -= step
        if np.abs(step).max() < 1e-4:
            break
    return w


def predict(x: Arr, w: Arr) -> Arr:
    out: Arr = 1.0 / (1.0 + np.exp(-(x @ w[:-1] + w[-1])))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "temporal-cache")
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--max-fs", type=float, default=0.01)
    ap.add_argument(
        "--max-other", type=float, default=1.0, help="false positives on two different kinds (1: no limit)"
    )
    ap.add_argument("--folds", type=int, default=4)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--threshold-only", action="store_true", help="rewrite THRESHOLD only (weights kept)")
    args = ap.parse_args()
    x, y, person, many, src = examples(args.cache)
    print(f"{len(y)} pairs, {int(y.sum())} positive, {int(many.sum())} same many-valued kind")
    folds = args.folds
    fold = person % folds
    prob = np.zeros(len(y))
    for f in range(folds):
        w = fit(x[fold != f], y[fold != f], args.l2)
        prob[fold == f] = predict(x[fold == f], w)
        print(f"fold {f} done", flush=True)
    neg_many = many > 0
    threshold = 0.5
    neg_other = (y == 0) & ~neg_many
    for t in np.arange(0.05, 0.991, 0.01):
        if (prob[neg_many] >= t).mean() <= args.max_fs and (prob[neg_other] >= t).mean() <= args.max_other:
            threshold = float(round(t, 2))
            break
    fired = prob >= threshold
    for label, m in (("generated", src == 0), ("designed-on even half", src == 1)):
        pos, mneg, oneg = m & (y == 1), m & neg_many, m & (y == 0) & ~neg_many
        print(
            f"{label}: held-out recall {fired[pos].mean():.3f} ({int(pos.sum())}), "
            f"false on same many-valued kind {fired[mneg].mean():.3f} ({int(mneg.sum())}), "
            f"false on other kinds {fired[oneg].mean():.3f} ({int(oneg.sum())})"
        )
    print(f"threshold {threshold}")
    if args.threshold_only:
        text = TARGET.read_text()
        TARGET.write_text(re.sub(r"\nTHRESHOLD = .*\n", f"\nTHRESHOLD = {threshold}\n", text))
        return 0
    w = fit(x, y, args.l2)
    if args.write:
        blob = base64.b64encode(w.astype("<f4").tobytes()).decode()
        lines = [blob[i : i + 96] for i in range(0, len(blob), 96)]
        fitted = (
            "# -- fitted (bench/train_slot_model.py --write rewrites this block)\n"
            "WEIGHTS_B64 = (\n" + "".join(f'    "{ln}"\n' for ln in lines) + ")\n"
            f"THRESHOLD = {threshold}\n"
            f'FITTED = "logistic, L2 {args.l2}, {len(y)} pairs ({int(y.sum())} positive) of '
            f"slot_training + knowledge_updates even people; threshold: false positives on same "
            f'many-valued kind <= {args.max_fs} on people held out ({folds} folds); used as a veto of the prototype pairs"\n'
            f"# -- end fitted\n"
        )
        text = TARGET.read_text()
        text = re.sub(r"# -- fitted .*?# -- end fitted\n", lambda _: fitted, text, flags=re.S)
        TARGET.write_text(text)
        print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
