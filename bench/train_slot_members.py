"""Fit ``core.slot_members.MEMBERS``: which of an entity's statements hold the slot a question asks (issue 26).

Training rows: the chain questions (not asking several values) of the designed-on set's
even-numbered people and of the first four fresh wording families, each with its top ``POOL``
statements by cosine (as ``slot_offline.py``); the statements of the entity the question
names, when there are at least three and the asked one (the highest focus key) is a
version of the asked chain. Each other statement is a row of ``member_features``,
labelled 1 when it is a version of that chain. The designed-on set's odd people and the
fifth and sixth fresh families are never read (they are the held-out checks); ``--train``
fits on other families (leave one family out: ``--train designed,fresh,fresh2,fresh3``
and score fresh4 with ``slot_offline.py``). Plain gradient
descent on standardised features (no randomness), folded back to raw-feature weights
and printed as the ``MEMBERS`` literal; ``--check`` evaluates held-out families per
feature row instead.

    PYTHONPATH=. .venv/bin/python bench/train_slot_members.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]

import slot_offline as so  # noqa: E402

from betterdb_memory.core import slot_model  # noqa: E402
from betterdb_memory.core.names import leading_name, names_of, same_name  # noqa: E402
from betterdb_memory.core.slot_members import FEATURES, MemberModel, member_features  # noqa: E402
from betterdb_memory.core.slot_question import asked_number  # noqa: E402

TRAIN = ("designed", "fresh", "fresh2", "fresh3", "fresh4")


def _people(name: str) -> Callable[[int], bool]:
    """The designed-on set's even-numbered people (its odd ones are held out); every person otherwise."""
    return (lambda e: e % 2 == 0) if name == "designed" else (lambda e: True)


def rows(
    name: str, which: Callable[[int], bool], cache: Path
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float64]]:
    ds, _ = so.SETS[name]()
    model = slot_model.for_model(slot_model.FITTED_MODEL_ID, 384)
    assert model is not None
    stmts = ds.statements
    vecs = so.embed([s.text for s in stmts], cache)
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    qv = so.embed([c.question for c in ds.chains], cache)
    qv = qv / np.linalg.norm(qv, axis=1, keepdims=True)
    pos = {s.id: i for i, s in enumerate(stmts)}
    xs, ys = [], []
    for c, chain in enumerate(ds.chains):
        if not which(chain.entity) or asked_number(chain.question) == "many":
            continue
        top = np.argsort(-(vecs @ qv[c]))[: so.POOL]
        names = names_of(chain.question)
        group = [
            int(i)
            for i in top
            if (lead := leading_name(stmts[i].text)) and any(same_name(lead, n) for n in names)
        ]
        if len(group) < 3:
            continue
        asked, feats = member_features(vecs[group], vecs[group] @ qv[c], model)
        versions = {pos[s.id] for s in chain.versions}
        if group[asked] not in versions:
            continue
        keep = np.arange(len(group)) != asked
        xs.append(feats[keep])
        ys.append(np.asarray([g in versions for g in group], dtype=np.float64)[keep])
    return np.vstack(xs), np.concatenate(ys)


def fit(x: npt.NDArray[np.float32], y: npt.NDArray[np.float64], l2: float = 1e-3) -> MemberModel:
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    for _ in range(3000):
        p = 1.0 / (1.0 + np.exp(-z @ w))
        w -= 0.5 * (z.T @ (p - y) / len(y) + l2 * w)
    raw = w[:-1] / sd
    bias = float(w[-1] - (w[:-1] * mu / sd).sum())
    return MemberModel(tuple(round(float(v), 4) for v in raw), round(bias, 4))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "temporal-cache")
    ap.add_argument("--check", default="", help="comma-separated families to score the rows of")
    ap.add_argument("--train", default=",".join(TRAIN), help="comma-separated families to fit on")
    args = ap.parse_args()
    parts = [rows(name, _people(name), args.cache) for name in args.train.split(",")]
    x = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    members = fit(x, y)
    print(f"{len(y)} rows, {int(y.sum())} versions; features {', '.join(FEATURES)}")
    print(f"MEMBERS = MemberModel(\n    weights={members.weights},\n    bias={members.bias},\n)")
    for name in filter(None, args.check.split(",")):
        xt, yt = rows(name, lambda e: True, args.cache)
        p = members.probabilities(xt) >= members.threshold
        print(f"{name}: versions kept {p[yt == 1].mean():.2f}, others kept {p[yt == 0].mean():.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
