"""Which of the asked entity's statements hold the slot a one-value question asks about. Pure.

Rule 3 of ``core.supersession`` judges a pair of statements by their kinds of attribute,
and on a kind the learned profiles never saw it misses most updates (``bench/slot_kindcv.py``:
39% of unseen-kind updates pass). A question that asks for one value ("Who is Ada's
piano *tuner*?", ``slot_question.asked_number``) carries what the pair lacks: the
slot itself. Among the statements of the entity it names:

1. **The asked statement** is the one whose content beyond the name points most toward
   the question's: the focus key of ``focus_keys`` (the statement's and the question's
   vectors minus the centroid of the entity's statements, which is mostly the name).
2. **Its versions** are the entity's other statements that a small logistic model
   (``MemberModel``) calls the same slot as the asked one, from six numbers about the
   two: their cosine, the cosine of their offsets from the entity's centroid (what
   they say beyond the name), how far the other's focus key falls below the asked
   one's, the overlap of their kind profiles (every kind, exclusive or not: the same
   kind is what generalises to unseen kinds, ``bench/slot_kindcv.py``), the other's
   rank among the entity's statements by closeness to the asked one, and one over the
   entity's size.

Every two of those with different ``valid_from`` are an ``(older, newer)`` pair, so the
newest version of the asked slot ranks first for the question. The question saying
"one value" is what makes this safe: a many-valued attribute is mostly asked with a
plural noun ("Which *languages* ..."), and a question that says nothing or asks several
values adds no pair here. A singular noun over a many-valued attribute ("What *food*
does Ada like?") is read as one value: its newest statement then ranks first.

The weights are fitted by ``bench/train_slot_members.py`` (fixed order, plain gradient
descent, no randomness) on the chain questions of the designed-on set's even people and
of the first four fresh wording families; it prints ``MEMBERS``. Fitted with one of
those families left out, the rule scored better on it than fitted on two families only.
Measured on held-out families in ``bench/results/temporal.md`` section H. Cost: one
profile product and one similarity product over the entity's statements, for a recall
whose question asks one value and whose candidates hold two versions of a name
(``vector_needs``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from .names import names_of
from .slot_focus import entity_rows, focus_keys, stacked
from .slot_model import SlotModel
from .slot_question import asked_number

__all__ = [
    "FEATURES",
    "MEMBERS",
    "MemberModel",
    "member_features",
    "question_slot_pairs",
    "slot_members",
]

FloatArray = npt.NDArray[np.float32]

#: ``member_features``' columns, in order.
FEATURES = (
    "similarity",
    "residual",
    "focus_gap",
    "profile_overlap",
    "similarity_rank",
    "inverse_size",
)


@dataclass(frozen=True, slots=True)
class MemberModel:
    """A logistic over ``FEATURES``: ``sigmoid(features . weights + bias) >= threshold`` is a version."""

    weights: tuple[float, ...]
    bias: float
    threshold: float = 0.5
    #: The least number of the entity's statements the rule reads (two are each other's
    #: centroid offset mirrored: the residual cosine says nothing).
    min_statements: int = 3

    def probabilities(self, features: FloatArray) -> npt.NDArray[np.float64]:
        """Per row of ``features``: the probability that it states the asked slot."""
        if features.shape[1] != len(self.weights):
            raise ValueError(f"expected {len(self.weights)} features, got {features.shape[1]}")
        z = features.astype(np.float64) @ np.asarray(self.weights, dtype=np.float64) + self.bias
        out: npt.NDArray[np.float64] = 1.0 / (1.0 + np.exp(-np.clip(z, -30.0, 30.0)))
        return out


#: Printed by ``bench/train_slot_members.py`` (see the module docstring).
MEMBERS = MemberModel(
    weights=(-2.0728, 7.6039, -5.4852, 7.1488, -1.37, 23.342),
    bias=-3.7228,
)


class _Statement(Protocol):
    """What the rule reads of a candidate (``supersession.Candidate`` has it)."""

    @property
    def text(self) -> str: ...
    @property
    def vector(self) -> FloatArray | None: ...
    @property
    def valid_from(self) -> int: ...
    @property
    def similarity(self) -> float | None: ...


def member_features(
    vectors: FloatArray, similarities: npt.ArrayLike, model: SlotModel
) -> tuple[int, FloatArray]:
    """The asked statement (the highest focus key) and every row's ``FEATURES`` against it.

    ``vectors``: the entity's statements, L2-normalised (at least two rows);
    ``similarities``: each one's cosine with the question. The asked row's own features
    are computed too (the caller skips it).
    """
    n = len(vectors)
    keys = focus_keys(vectors, similarities)
    top = int(np.argmax(keys))
    offsets = vectors - vectors.mean(axis=0)
    offsets = offsets / np.maximum(np.linalg.norm(offsets, axis=1, keepdims=True), 1e-9)
    profiles = model.kinds.profiles(vectors)
    rows = np.arange(n, dtype=np.intp)
    overlap = model.kinds.overlaps(profiles, np.full(n, top, dtype=np.intp), rows)
    sim = vectors @ vectors[top]
    # Rank by closeness to the asked statement, 0 the nearest other; the asked one last.
    order = np.argsort(-np.where(rows == top, -9.0, sim), kind="stable")
    rank = np.empty(n, dtype=np.float64)
    rank[order] = np.arange(n)
    features = np.stack(
        [
            sim,
            offsets @ offsets[top],
            keys[top] - keys,
            overlap,
            rank / max(n - 1, 1),
            np.full(n, 1.0 / n),
        ],
        axis=1,
    ).astype(np.float32)
    return top, features


def slot_members(
    statements: Sequence[_Statement],
    vectors: FloatArray,
    similarities: npt.ArrayLike,
    model: SlotModel,
    members: MemberModel = MEMBERS,
) -> list[tuple[int, int]]:
    """``(older, newer)`` pairs of row indices that state the asked slot (see the module).

    ``statements``, ``vectors``, ``similarities``: the statements of the entity a
    one-value question names, their L2-normalised vectors and their cosines with the
    question. Empty below ``members.min_statements``.
    """
    if len(statements) < max(members.min_statements, 2):
        return []
    top, features = member_features(vectors, similarities, model)
    p = members.probabilities(features)
    slot = [top] + [i for i in range(len(statements)) if i != top and p[i] >= members.threshold]
    out = []
    for a, b in itertools.combinations(sorted(slot), 2):
        va, vb = statements[a].valid_from, statements[b].valid_from
        if va != vb:
            out.append((a, b) if va < vb else (b, a))
    return out


def question_slot_pairs(
    candidates: Sequence[_Statement], model: SlotModel, question: str, members: MemberModel = MEMBERS
) -> list[tuple[int, int]]:
    """``(older, newer)`` index pairs of ``candidates`` holding the slot a one-value ``question`` asks.

    The entity's statements: the candidates with a vector and a ``similarity`` whose
    leading name the question names (the candidates ``supersession.vector_needs`` has
    the store read). Only for a question ``asked_number`` reads as asking one value (a
    singular asked noun, "who" holding a role toward the person, an amount).
    """
    if asked_number(question) != "one":
        return []
    group = [i for i in entity_rows(candidates, names_of(question)) if candidates[i].vector is not None]
    if len(group) < members.min_statements:
        return []
    vecs = stacked(candidates, group)
    sims = np.asarray([candidates[i].similarity for i in group], dtype=np.float64)
    found = slot_members([candidates[i] for i in group], vecs, sims, model, members)
    return [(group[o], group[n]) for o, n in found]
