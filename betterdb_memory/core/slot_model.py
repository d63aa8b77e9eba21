"""Learned rule 3 of ``core.supersession``: do two statements of one person state one exclusive slot?

Rule 3 asks whether two statements of one person say the same kind of attribute, one
that holds a single value at a time ("lives in Lisbon" / "moved to Berlin": yes;
"likes tea" / "likes coffee": no, many values; "lives in Lisbon" / "works at Acme":
no, two kinds). The hand-written prototypes (``core.slot_kinds``) answer it by
similarity to a few sentences per known kind. With the shipped MiniLM embedder this
module answers it instead, in two learned parts:

1. **Kind profiles (``KindModel``).** A softmax classifier reads ONE statement's vector
   and gives its profile over ~100 kinds of attribute seen in training, each known to
   be exclusive or many-valued. Two statements of one person share a large common
   part, the person's name, which makes two slots of one person look alike to any
   similarity of the two vectors (the first, pair-only model let 36-62% of such pairs
   through on held-out people). A classifier of single statements learns the name away:
   in training every kind is stated about hundreds of different people, so the name
   directions carry no kind. The pair's score is the exclusive part of the overlap of
   the two profiles, ``sum_k p_k(u) q_k(v) e_k / (|p(u)| |q(v)|)`` (``e_k`` 1 for an
   exclusive kind); an unseen kind spreads over the nearest known ones in the same way
   for both versions, so its versions still overlap.
2. **A many-valued veto (``Veto``).** The first round's logistic regression on the pair,
   ``sigmoid(u . (a * v) + s(u) + s(v) + b)``, ``s(x) = (x * x) . c + x . d``, with a
   low threshold: it drops pairs it is sure are two values of a many-valued kind.

A pair is one slot when the profile score is at least ``SlotModel.threshold`` and the
veto lets it through. Weights fitted by ``bench/train_slot_model.py`` (fixed seed) on
generated statements of many kinds and composed wordings
(``bench/temporal_data/slot_training.py``) and the designed-on set's training half;
no fresh family is read there. Cost: one ``(members, d) x (d, kinds)`` product and a
few dot products per pair, microseconds for the handful of pairs a recall asks about.

The weights live in the vector space they were fitted in: the shipped ONNX MiniLM
(``FITTED_MODEL_ID``). ``for_model`` returns the model for that embedder only; any
other embedder keeps the prototypes. Shipped as package data (``slot_model.npz``
beside this module, read once; no download).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = [
    "FITTED_MODEL_ID",
    "WEIGHTS_FILE",
    "KindModel",
    "SlotModel",
    "Veto",
    "for_model",
    "load",
    "pair_features",
]

FloatArray = npt.NDArray[np.float32]
IndexArray = npt.NDArray[np.intp]

#: The embedder whose vectors the weights are fitted on (``embedders.onnx.MODEL_ID``).
FITTED_MODEL_ID = "onnx:all-MiniLM-L6-v2-int8"
#: The fitted weights (``bench/train_slot_model.py --write`` writes it).
WEIGHTS_FILE = Path(__file__).with_name("slot_model.npz")


def pair_features(a: FloatArray, b: FloatArray) -> FloatArray:
    """The veto's rows ``[u * v, u * u + v * v, u + v]`` of paired rows of ``a`` and ``b`` (symmetric)."""
    out: FloatArray = np.hstack([a * b, a * a + b * b, a + b]).astype(np.float32)
    return out


@dataclass(frozen=True, slots=True)
class KindModel:
    """A softmax over kinds of attribute from one statement's vector (part 1 of the module docstring)."""

    weights: FloatArray  # (d, kinds)
    bias: FloatArray  # (kinds,)
    exclusive: FloatArray  # (kinds,): 1.0 for a kind that holds one value at a time
    kinds: tuple[str, ...] = ()

    def profiles(self, vectors: FloatArray) -> FloatArray:
        """(n, kinds): each row's probability of each kind."""
        z = vectors @ self.weights + self.bias
        z = np.exp(z - z.max(axis=1, keepdims=True))
        out: FloatArray = (z / z.sum(axis=1, keepdims=True)).astype(np.float32)
        return out

    def scores(self, profiles: FloatArray, left: IndexArray, right: IndexArray) -> FloatArray:
        """Per pair of rows ``(left[i], right[i])`` of ``profiles``: the exclusive part of their cosine."""
        p, q = profiles[left], profiles[right]
        norms = np.maximum(np.linalg.norm(p, axis=1) * np.linalg.norm(q, axis=1), 1e-12)
        out: FloatArray = ((p * q) @ self.exclusive / norms).astype(np.float32)
        return out

    def overlaps(self, profiles: FloatArray, left: IndexArray, right: IndexArray) -> FloatArray:
        """Per pair of rows: their profiles' cosine, every kind counted (the same kind, whether exclusive or not)."""
        p, q = profiles[left], profiles[right]
        norms = np.maximum(np.linalg.norm(p, axis=1) * np.linalg.norm(q, axis=1), 1e-12)
        out: FloatArray = ((p * q).sum(axis=1) / norms).astype(np.float32)
        return out


@dataclass(frozen=True, slots=True)
class Veto:
    """The first round's pair logistic (part 2 of the module docstring), split as its formula reads."""

    pair: FloatArray  # a: (d,)
    square: FloatArray  # c: (d,)
    linear: FloatArray  # d: (d,)
    bias: float
    threshold: float

    @classmethod
    def of(cls, weights: npt.ArrayLike, threshold: float) -> Veto:
        """From ``3 d + 1`` weights in ``pair_features``' order, the bias last."""
        w = np.asarray(weights, dtype=np.float32).ravel()
        if len(w) < 4 or (len(w) - 1) % 3:
            raise ValueError(f"expected 3 d + 1 weights, got {len(w)}")
        d = (len(w) - 1) // 3
        return cls(w[:d], w[d : 2 * d], w[2 * d : 3 * d], float(w[-1]), float(threshold))

    def probabilities(self, a: FloatArray, b: FloatArray) -> FloatArray:
        """Per paired row of ``a`` and ``b``: the probability that they state one exclusive slot."""
        own = (a * a + b * b) @ self.square + (a + b) @ self.linear
        logits = ((a * b) @ self.pair + own + self.bias).astype(np.float64)
        out: FloatArray = (1.0 / (1.0 + np.exp(-np.clip(logits, -30.0, 30.0)))).astype(np.float32)
        return out


@dataclass(frozen=True, slots=True)
class SlotModel:
    """Rule 3 for the fitted embedder: kind profiles, a threshold on their score, and the veto."""

    kinds: KindModel
    veto: Veto | None
    threshold: float
    fitted: str = ""  # what it was fitted on (for the docs)

    @property
    def dimensions(self) -> int:
        return int(self.kinds.weights.shape[0])

    def same_slot(
        self, vectors: FloatArray, left: npt.ArrayLike, right: npt.ArrayLike
    ) -> npt.NDArray[np.bool_]:
        """Per pair of rows ``(left[i], right[i])`` of ``vectors``: one exclusive slot.

        The profile score at least the threshold, and the veto lets the pair through.
        Each row's profile is computed once, however many pairs it is in.
        """
        li, ri = np.asarray(left, dtype=np.intp), np.asarray(right, dtype=np.intp)
        out: npt.NDArray[np.bool_] = self.kinds.scores(self.kinds.profiles(vectors), li, ri) >= self.threshold
        if self.veto is not None and out.any():
            out &= self.veto.probabilities(vectors[li], vectors[ri]) >= self.veto.threshold
        return out


def load(path: Path) -> SlotModel:
    """A model saved by ``bench/train_slot_model.py`` (an ``.npz``; see its ``save``)."""
    with np.load(path, allow_pickle=False) as z:
        kinds = KindModel(
            np.asarray(z["kind_w"], dtype=np.float32),
            np.asarray(z["kind_b"], dtype=np.float32),
            np.asarray(z["kind_exclusive"], dtype=np.float32),
            tuple(str(k) for k in z["kind_names"]),
        )
        if kinds.weights.ndim != 2 or not kinds.weights.shape[1] == len(kinds.bias) == len(kinds.exclusive):
            raise ValueError(f"kind weights of shape {kinds.weights.shape} do not match their biases")
        veto = Veto.of(z["veto_w"], float(z["veto_threshold"])) if len(z["veto_w"]) else None
        if veto is not None and len(veto.pair) != kinds.weights.shape[0]:
            raise ValueError("the veto and the kind profiles are fitted on vectors of different sizes")
        return SlotModel(kinds, veto, float(z["threshold"]), str(z["fitted"]))


@functools.cache
def _fitted() -> SlotModel | None:
    return load(WEIGHTS_FILE) if WEIGHTS_FILE.exists() else None


def for_model(model_id: str, dimensions: int) -> SlotModel | None:
    """The shipped model for vectors of ``model_id`` (None for any other embedder: prototypes then)."""
    if model_id != FITTED_MODEL_ID:
        return None
    model = _fitted()
    if model is None or dimensions != model.dimensions:
        return None
    return model
