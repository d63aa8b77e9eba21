"""A learned "same exclusive slot" classifier for pairs of statements (rule 3 of ``core.supersession``).

Rule 3 asks whether two statements of one person say the same kind of attribute, one
that holds a single value at a time ("lives in Lisbon" / "moved to Berlin": yes;
"likes tea" / "likes coffee": no, many values; "lives in Lisbon" / "works at Acme":
no, two kinds). The hand-written prototypes (``core.slot_kinds``) answer it by
similarity to a few sentences per known kind, and every new wording or kind shifts
which side wins. This model answers it from the two statements' vectors with weights
fitted on thousands of labelled pairs of many kinds and wordings
(``bench/train_slot_model.py`` over ``bench/temporal_data/slot_training.py`` and the
designed-on set's training half):

    p(u, v) = sigmoid(u . (a * v) + s(u) + s(v) + b),   s(x) = (x * x) . c + x . d

a logistic regression on the symmetric features ``[u * v, u * u + v * v, u + v]``
(``pair_features``). ``s`` reads one statement's vector alone (what kind of attribute
it states and whether that kind is exclusive) and could be computed at write time;
the pair part is a weighted dot product (whether the two state the same kind).

The weights live in the vector space they were fitted in: the shipped ONNX MiniLM
(``FITTED_MODEL_ID``). ``for_model`` returns the model for that embedder only; any
other embedder keeps the prototypes, which it embeds itself. Shipped as constants
(base64 of little-endian float32, no download, no dependency beyond numpy).
"""

from __future__ import annotations

import base64
import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["FITTED", "FITTED_MODEL_ID", "THRESHOLD", "SlotModel", "for_model", "pair_features"]

FloatArray = npt.NDArray[np.float32]

#: The embedder whose vectors the weights are fitted on (``embedders.onnx.MODEL_ID``).
FITTED_MODEL_ID = "onnx:all-MiniLM-L6-v2-int8"

# -- fitted (bench/train_slot_model.py --write rewrites this block)
WEIGHTS_B64 = ""
THRESHOLD = 0.5
FITTED = ""
# -- end fitted


def pair_features(a: FloatArray, b: FloatArray) -> FloatArray:
    """Rows ``[u * v, u * u + v * v, u + v]`` of paired rows of ``a`` and ``b`` (symmetric in the pair)."""
    out: FloatArray = np.hstack([a * b, a * a + b * b, a + b]).astype(np.float32)
    return out


@dataclass(frozen=True, slots=True)
class SlotModel:
    """The fitted weights, split as the formula in the module docstring reads them."""

    pair: FloatArray  # a: (d,)
    square: FloatArray  # c: (d,)
    linear: FloatArray  # d: (d,)
    bias: float
    threshold: float

    @classmethod
    def of(cls, weights: npt.ArrayLike, threshold: float) -> SlotModel:
        """From ``3 d + 1`` weights in ``pair_features``' order, the bias last."""
        w = np.asarray(weights, dtype=np.float32).ravel()
        if len(w) < 4 or (len(w) - 1) % 3:
            raise ValueError(f"expected 3 d + 1 weights, got {len(w)}")
        d = (len(w) - 1) // 3
        return cls(w[:d], w[d : 2 * d], w[2 * d : 3 * d], float(w[-1]), float(threshold))

    @property
    def dimensions(self) -> int:
        return len(self.pair)

    def own(self, vectors: FloatArray) -> FloatArray:
        """``s(x)`` per row: the part of the score one statement's vector decides alone."""
        out: FloatArray = (vectors * vectors) @ self.square + vectors @ self.linear
        return out

    def probabilities(self, vectors: FloatArray) -> FloatArray:
        """(n, n): the probability that rows i and j state the same exclusive slot."""
        own = self.own(vectors)
        logits = (vectors * self.pair) @ vectors.T + own[:, None] + own[None, :] + self.bias
        out: FloatArray = (1.0 / (1.0 + np.exp(-np.clip(logits, -30.0, 30.0)))).astype(np.float32)
        return out

    def same_slot(self, vectors: FloatArray) -> npt.NDArray[np.bool_]:
        """(n, n): ``probabilities`` at least the fitted threshold."""
        out: npt.NDArray[np.bool_] = self.probabilities(vectors) >= self.threshold
        return out


@functools.cache
def _fitted() -> SlotModel | None:
    if not WEIGHTS_B64:
        return None
    return SlotModel.of(np.frombuffer(base64.b64decode(WEIGHTS_B64), dtype="<f4"), THRESHOLD)


def for_model(model_id: str, dimensions: int) -> SlotModel | None:
    """The shipped model for vectors of ``model_id`` (None for any other embedder: prototypes then)."""
    model = _fitted()
    if model is None or model_id != FITTED_MODEL_ID or dimensions != model.dimensions:
        return None
    return model
