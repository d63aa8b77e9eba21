"""Which of the asked entity's statements a question about the present points at. Pure.

Same-slot supersession (``core.supersession``) promotes the newest version of a slot;
that promotes the wrong slot when the ranking put another attribute of the person
first: every statement of a person is near a question naming them, and a slot of five
versions has five chances to win. The question says which attribute it asks about, but
only beyond the name that all of the person's statements share. So the person's
statements are re-ordered among themselves by what they say beyond the name
(``focus_keys``), keeping the set of scores they had (``focus_scores``).

A **namesake** (``names.namesake``: "Kwame Westleigh" when the question names "Kwame
Northleigh") embeds close to the question through the shared name word, yet is another
person: ``focus_scores`` ranks such statements below those of the person asked about.
On the knowledge-update families this moved current-first by 0.3 to 1.3 points
(``bench/results/temporal.md`` section H).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from .names import leading_name, names_of, namesake, same_name
from .slot_kinds import normalised

__all__ = ["entity_rows", "focus_keys", "focus_scores", "stacked"]

FloatArray = npt.NDArray[np.float32]


class _Vectored(Protocol):
    @property
    def vector(self) -> FloatArray | None: ...


class _Named(_Vectored, Protocol):
    @property
    def text(self) -> str: ...
    @property
    def similarity(self) -> float | None: ...


class _Scored(_Named, Protocol):
    """What the focus reads of a candidate (``supersession.Candidate`` has it)."""

    @property
    def score(self) -> float: ...


def stacked(candidates: Sequence[_Vectored], rows: Sequence[int]) -> FloatArray:
    """The ``rows``' vectors, L2-normalised, stacked; each must be there (``supersession.vector_needs``)."""
    vecs = []
    for x in rows:
        v = candidates[x].vector
        if v is None:
            raise ValueError(f"candidate {x} has no vector: vector_needs() names the vectors the rule reads")
        vecs.append(v)
    return normalised(np.stack(vecs).astype(np.float32))


def focus_keys(vectors: FloatArray, similarities: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Per statement of one entity: how far what it says beyond the name points toward the question.

    ``(v - m) . (q - m) / |v - m|`` (``m`` the rows' centroid, ``q`` the question's
    vector), from ``similarities`` (``v . q``): ``(v - m) . (q - m) = (v . q - mean(v . q))
    - (v - m) . m``. The constant ``|q - m|`` is left out (it orders nothing).
    """
    sims = np.asarray(similarities, dtype=np.float64)
    centroid = vectors.mean(axis=0)
    offsets = vectors - centroid
    lengths = np.linalg.norm(offsets, axis=1)
    toward = (sims - sims.mean()) - offsets @ centroid
    out: npt.NDArray[np.float64] = np.where(
        lengths > 1e-9, toward / np.where(lengths > 1e-9, lengths, 1.0), 0.0
    )
    return out


def entity_rows(candidates: Sequence[_Named], names: frozenset[str]) -> list[int]:
    """Rows of ``candidates`` with a ``similarity`` whose leading name is one of ``names`` (the question's)."""
    matches: dict[str, bool] = {}  # per leading name (a few per recall)
    out = []
    for i, c in enumerate(candidates):
        lead = leading_name(c.text) if c.similarity is not None else None
        if lead is None:
            continue
        if lead not in matches:
            matches[lead] = any(same_name(lead, n) for n in names)
        if matches[lead]:
            out.append(i)
    return out


def focus_scores(
    candidates: Sequence[_Scored], question: str, pairs: Sequence[tuple[int, int]]
) -> list[float]:
    """The candidates' scores with the statements of the question's entity re-ordered (see the module).

    The entity: the candidates with a ``similarity`` whose leading name is one of
    ``question``'s; only when one of ``pairs`` (same-slot ``(older, newer)`` pairs) lies
    within it. Their scores and the scores of the namesakes' statements, sorted, go to
    the entity's statements first, in the order of their focus keys, then to the
    namesakes' in their own order. Others keep their scores. ``O(entity x d)``.
    """
    scores = [float(c.score) for c in candidates]
    names = names_of(question)
    if not pairs or not names:
        return scores
    group = entity_rows(candidates, names)
    mine = set(group)
    if not any(o in mine and n in mine for o, n in pairs):
        return scores
    sims = np.asarray([candidates[i].similarity for i in group], dtype=np.float64)
    key = focus_keys(stacked(candidates, group), sims)
    others = [i for i in range(len(candidates)) if i not in mine and _namesake_of(candidates[i], names)]
    ranked = sorted((scores[i] for i in [*group, *others]), reverse=True)
    for score, j in zip(ranked, np.argsort(-key, kind="stable").tolist(), strict=False):
        scores[group[j]] = score
    below = sorted(others, key=lambda i: -scores[i])
    for score, i in zip(ranked[len(group) :], below, strict=True):
        scores[i] = score
    return scores


def _namesake_of(candidate: _Named, names: frozenset[str]) -> bool:
    """Whether ``candidate`` leads with a namesake of one of ``names`` (``names.namesake``)."""
    lead = leading_name(candidate.text) if candidate.similarity is not None else None
    return lead is not None and any(namesake(lead, n) for n in names)
