"""Implicit updates: which recall candidates state the same slot, so the newer ranks above the older.

Most memories arrive without a subject: "Ada lives in Lisbon." (2019), then "Ada moved
to Berlin." (2024). Both come back for "Where does Ada live?", and similarity alone
ranks them in no useful order. The rule here, **same-slot supersession (SSS)**, decides
from the candidates alone (their text, stored vector and ``valid_from``; no LLM, no
I/O) which pairs say the same attribute of the same entity, and for a question about
the present ranks the newer of each such pair above the older.

An older candidate ``o`` is superseded by a newer candidate ``n`` (``n.valid_from >
o.valid_from``) when all three hold:

1. **Same entity (the same leading name).** The first name of each text, its subject
   in English word order, is the same name (equal, or one the first or last part of
   the other). Names are runs of capitalised words that are not sentence starters,
   numbers other than years, and ``<self>`` for "I / my / the user". "Ada Moreau lives
   in Lisbon" and "Ada moved to Berlin" lead with "ada (moreau)"; "Greta Zeller is a
   nurse" and "Greta Ashby is a chef" do not; "I live in Lisbon" and "I moved to
   Berlin" lead with ``<self>``. (Any shared name measured worse: two people may own
   one phone model.)
2. **Close statements (mutual similarity).** The cosine of their stored vectors is at
   least ``min_similarity``.
3. **The same exclusive kind of attribute.** With the shipped MiniLM embedder, learned
   (``core.slot_model``, ``learned_pairs``): kind profiles of single statements (the
   name both share drops out), the exclusive part of their overlap at least a
   threshold, and a veto of many-valued pairs. With any other embedder: similarity to
   prototype sentences of known kinds (``core.slot_kinds``, ``same_kind_pairs``),
   embedded once with the store's embedder. ``kind_pairs`` picks the judge.

Why rule 3: with MiniLM, "Ada likes tea" / "Ada likes coffee" are as similar as "Ada
lives in Lisbon" / "Ada lives in Berlin" (medians 0.70 and 0.68), and two attributes of
one person ("lives in", "drives a") are not far below (0.53): rules 1-2 alone supersede
97% of both-current pairs. Kinds of attribute are similarity too (to known kinds), need
no LLM, and fail safe: a statement whose kind is many-valued or unknown is never
superseded, which costs an update its promotion, never a current fact its rank.

**The question's number.** A question asking for several values ("Which *languages*
...") supersedes nothing of its entity (``plural_veto``); one asking for one value
("Which *pharmacy* ...") lets a pair of its entity through on the same kind alone,
exclusive or not, when the two are each other's nearest statement of it
(``one_value_pairs``), and adds the pairs of the slot it asks about: the entity's
statement that says most toward the question and those a small learned model calls its
versions (``slot_members.question_slot_pairs``), whatever their kinds.

``present_order`` applies the rule (for questions about the present; a recall with
``as_of`` or a time window must not use it): the newest version of a slot takes the
best score of the slot's versions, and each older one goes just below its supersessors.

**Which slot the question asks about (``slot_focus.focus_scores``).** That promotion
also promotes the wrong slot when the ranking put another attribute of the person first
(every statement of a person is near a question naming them, and a slot of five versions
has five chances to win). So when a same-slot pair lies among the statements of an
entity the question names, those are re-ordered among themselves by what they say
beyond the name, and a namesake's statements ("Kwame Westleigh" for a question about
"Kwame Northleigh") go below them.

Measured through the public API (``bench/temporal_fresh.py``, ``bench/results/temporal.md``
section I): the current statement first for 91.1% of questions about the present on the
designed-on set's held-out half, 72.9%, 74.2% and 61.5% on three fresh families of kinds
never seen (fresh5-7: none tuned on), 78.2-85.6% on the four families the member model was
fitted on; false supersession of both-current pairs at most 1.7%, 3.1% on fresh7 (the
goals: 95% and 2%).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .names import leading_name, name_groups, name_mates, names_of, namesake, same_name
from .slot_focus import focus_scores, stacked
from .slot_kinds import EXCLUSIVE_KINDS, MANY_KINDS, Prototypes, products, prototype_texts
from .slot_members import question_slot_pairs
from .slot_model import SlotModel
from .slot_question import asked_number, asked_pairs, plural_veto

__all__ = [
    "EXCLUSIVE_KINDS",
    "MANY_KINDS",
    "Candidate",
    "Prototypes",
    "SupersessionRule",
    "effective_scores",
    "focus_scores",
    "kind_pairs",
    "learned_pairs",
    "near_pairs",
    "one_value_pairs",
    "plural_veto",
    "present_order",
    "prototype_texts",
    "question_slot_pairs",
    "rank_superseded",
    "same_exclusive_kind",
    "same_kind_pairs",
    "superseded_pairs",
    "vector_needs",
]

FloatArray = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One recall candidate as the rule sees it.

    Attributes:
        id: the memory id (returned unchanged).
        text: its content.
        vector: its stored embedding, L2-normalised (as the store keeps them); None
            when the rule cannot read it (``vector_needs`` says which it reads).
        valid_from: when it became true (epoch ms).
        score: its recall score (higher first).
        similarity: its cosine with the question (``1 - distance``), or None when
            unknown (then ``focus_scores`` leaves it where it is).
    """

    id: str
    text: str
    vector: FloatArray | None
    valid_from: int
    score: float
    similarity: float | None = None


@dataclass(frozen=True, slots=True)
class SupersessionRule:
    """The thresholds of same-slot supersession (see the module's docstring).

    ``min_kind_correlation`` and ``min_exclusive_margin`` are rule 3's second way
    (``same_kind_pairs``), fitted on half the people of the knowledge-update set with
    false supersession held to 1% there (half the goal's 2%), reported on the other half.
    """

    min_similarity: float = 0.45
    min_kind_correlation: float = 0.5
    min_exclusive_margin: float = 0.08
    #: ``one_value_pairs``: the least cosine of two kind profiles (every kind counted).
    min_one_value_overlap: float = 0.5


def same_exclusive_kind(kind_scores: FloatArray, prototypes: Prototypes) -> npt.NDArray[np.bool_]:
    """(n, n): both rows' best kinds are exclusive and each is among the other's two best."""
    order = np.argsort(-kind_scores, axis=1)
    best, second = order[:, 0], order[:, 1] if kind_scores.shape[1] > 1 else order[:, 0]
    exclusive = prototypes.exclusive[best]
    in_top2 = (best[:, None] == best[None, :]) | (best[:, None] == second[None, :])
    out: npt.NDArray[np.bool_] = in_top2 & in_top2.T & exclusive[:, None] & exclusive[None, :]
    return out


def near_pairs(
    candidates: Sequence[Candidate], rule: SupersessionRule = SupersessionRule()
) -> list[tuple[int, int]]:
    """``(older, newer)`` index pairs that pass rules 1-2 (same leading name, close statements).

    The cheap half of the rule, run first on every recall: most recalls have no such
    pair, and then the prototypes (rule 3) are never needed, so a store whose
    questions never meet two versions of a statement never embeds them. Rule 1 is read
    from the texts first (``name_mates``), so only the vectors of candidates that share
    a leading name with another are compared (``vector_needs``). Pairs in row order
    (older index first within a row), as ``np.nonzero`` of the pair matrix gives them.
    """
    if len(candidates) < 2:
        return []
    groups = name_groups([leading_name(c.text) for c in candidates])
    if not groups:
        return []
    n = len(candidates)
    vf = np.fromiter((c.valid_from for c in candidates), np.int64, n)
    # The pairs of ``name_mates`` (row i, mate j > i) with different ``valid_from``, as a
    # matrix: ``np.nonzero`` lists them in the row order the loop over the mates did.
    mate = np.zeros((n, n), dtype=np.bool_)
    for own, group in groups:
        mate[np.ix_(own, group)] = True
    named = np.triu(mate, 1) & (vf[:, None] != vf[None, :])
    first, second = np.nonzero(named)
    if not len(first):
        return []
    rows = np.union1d(first, second)  # ascending, as ``sorted(set(...))``
    vecs = stacked(candidates, rows.tolist())
    sims = products(vecs, vecs)
    keep = sims[np.searchsorted(rows, first), np.searchsorted(rows, second)] >= rule.min_similarity
    first, second = first[keep], second[keep]
    swap = vf[first] > vf[second]  # (older, newer): vf differ within a pair
    older, newer = np.where(swap, second, first).tolist(), np.where(swap, first, second).tolist()
    return list(zip(older, newer, strict=True))


def vector_needs(texts: Sequence[str], valid_from: Sequence[int], question: str | None = None) -> list[int]:
    """Indices of the candidates (their ``texts``, ``valid_from``) whose vectors the rule reads, ascending.

    Empty when no two candidates pass rule 1 with different ``valid_from`` (nothing can
    be superseded: no vector is read). Otherwise those with a same-name mate (rules 2
    and 3 compare them) and those whose leading name ``question`` names or is a
    namesake of one it names (``focus_scores``). Read from the texts alone, so a recall asks the store for these
    vectors only; candidates outside it can be left out of the rule (the same pairs
    and scores). A rule that reads other vectors must say so here.
    """
    leads = [leading_name(t) for t in texts]
    groups = name_groups(leads)
    # A pair of mates with different valid_from: some group holds two different ones (its
    # names' indices are each other's mates).
    if not any(len({valid_from[j] for j in group}) > 1 for _, group in groups):
        return []
    names = names_of(question) if question else frozenset()

    @functools.cache
    def asked(lead: str) -> bool:
        return any(same_name(lead, n) or namesake(lead, n) for n in names)

    mated = {i for own, _ in groups for i in own}
    return [i for i, lead in enumerate(leads) if i in mated or (lead and asked(lead))]


def same_kind_pairs(
    candidates: Sequence[Candidate],
    pairs: Sequence[tuple[int, int]],
    prototypes: Prototypes,
    rule: SupersessionRule = SupersessionRule(),
) -> list[tuple[int, int]]:
    """The ``pairs`` that also pass rule 3 (the same exclusive kind of attribute), one of two ways.

    1. Each one's best kind is exclusive and among the other's two best.
    2. Or they are each other's nearest candidate with the same leading name (cosine),
       their kind profiles correlate by ``rule.min_kind_correlation``, and their summed
       kind scores put an exclusive kind ``rule.min_exclusive_margin`` above every
       many-valued one. Best kinds split one slot ("joined Acme": employer, "works at
       Initech": job; "is a translator": languages) whose versions are still each
       other's closest statements about that person; both-current likes are close too,
       hence the margin. ``O(pair members x candidates)``.
    """
    if not pairs:
        return []
    rows = sorted({x for pair in pairs for x in pair})
    at = {x: r for r, x in enumerate(rows)}
    vecs = stacked(candidates, rows)
    kinds = prototypes.kind_scores(vecs)
    same_kind = same_exclusive_kind(kinds, prototypes)
    nearest = _nearest_of_entity(candidates, rows, vecs)
    z = (kinds - kinds.mean(axis=1, keepdims=True)) / np.maximum(kinds.std(axis=1, keepdims=True), 1e-9)
    out = []
    for o, n in pairs:
        a, b = at[o], at[n]
        if same_kind[a, b]:
            out.append((o, n))
            continue
        if nearest.get(o) != n or nearest.get(n) != o:
            continue
        joint = kinds[a] + kinds[b]
        margin = float(joint[prototypes.exclusive].max() - joint[~prototypes.exclusive].max())
        corr = float(z[a] @ z[b]) / kinds.shape[1]
        if corr >= rule.min_kind_correlation and margin >= rule.min_exclusive_margin:
            out.append((o, n))
    return out


def learned_pairs(
    candidates: Sequence[Candidate], pairs: Sequence[tuple[int, int]], model: SlotModel
) -> list[tuple[int, int]]:
    """The ``pairs`` that pass rule 3 by the learned model (``core.slot_model``).

    Reads the pair members' vectors only (within ``vector_needs``): ``O(members x d x kinds + pairs x d)``.
    """
    if not pairs:
        return []
    rows = sorted({x for pair in pairs for x in pair})
    at = {x: r for r, x in enumerate(rows)}
    same = model.same_slot(stacked(candidates, rows), [at[o] for o, _ in pairs], [at[n] for _, n in pairs])
    return [pair for pair, keep in zip(pairs, same.tolist(), strict=True) if keep]


def kind_pairs(
    candidates: Sequence[Candidate],
    pairs: Sequence[tuple[int, int]],
    prototypes: Prototypes,
    model: SlotModel | None = None,
    rule: SupersessionRule = SupersessionRule(),
    question: str | None = None,
) -> list[tuple[int, int]]:
    """Rule 3: the learned ``model``'s pairs (the embedder it was fitted on), else the prototypes'.

    ``question``: the recall's question. One asking for several values drops its
    entity's pairs first (``plural_veto``); with a model, one asking for one value adds
    the pairs ``one_value_pairs`` finds among those the model dropped.
    """
    pairs = plural_veto(candidates, pairs, question) if question else pairs
    if model is None:
        return same_kind_pairs(candidates, pairs, prototypes, rule)
    kept = set(learned_pairs(candidates, pairs, model))
    if question and len(kept) < len(pairs):
        kept.update(one_value_pairs(candidates, [p for p in pairs if p not in kept], model, question, rule))
    out = [p for p in pairs if p in kept]
    if question:
        out += [p for p in question_slot_pairs(candidates, model, question) if p not in kept]
    return out


def one_value_pairs(
    candidates: Sequence[Candidate],
    pairs: Sequence[tuple[int, int]],
    model: SlotModel,
    question: str,
    rule: SupersessionRule = SupersessionRule(),
) -> list[tuple[int, int]]:
    """The ``pairs`` that are one slot because ``question`` asks one value of the entity they state.

    Rule 3's profile score weighs the exclusive kinds the model knows; a kind it never
    saw spreads over known ones, many-valued among them, and its updates score too low
    (~60% of the misses on the fresh families). A question whose asked noun is singular
    ("Which *pharmacy* does Ada use?", ``asked_number``) says the asked attribute holds
    one value, so of its entity's pairs only the same kind is left to tell: the two
    statements are each other's nearest statement of that entity (cosine) and their
    profiles overlap (cosine over every kind) by ``rule.min_one_value_overlap``.
    """
    if not pairs or asked_number(question) != "one":
        return []
    mine = [p for p, m in zip(pairs, asked_pairs(candidates, pairs, question), strict=True) if m]
    if not mine:
        return []
    rows = sorted({x for pair in mine for x in pair})
    at = {x: r for r, x in enumerate(rows)}
    vecs = stacked(candidates, rows)
    nearest = _nearest_of_entity(candidates, rows, vecs)
    mine = [(o, n) for o, n in mine if nearest.get(o) == n and nearest.get(n) == o]
    if not mine:
        return []
    left = np.asarray([at[o] for o, _ in mine], dtype=np.intp)
    right = np.asarray([at[n] for _, n in mine], dtype=np.intp)
    overlap = model.kinds.overlaps(model.kinds.profiles(vecs), left, right)
    return [pair for pair, s in zip(mine, overlap.tolist(), strict=True) if s >= rule.min_one_value_overlap]


def _nearest_of_entity(
    candidates: Sequence[Candidate], rows: Sequence[int], vecs: FloatArray
) -> dict[int, int]:
    """For each of ``rows``: the candidate with the same leading name nearest to it by cosine."""
    mates = name_mates([leading_name(c.text) for c in candidates])
    cols = sorted({j for x in rows for j in mates[x]})
    if not cols:
        return {}
    at = {j: c for c, j in enumerate(cols)}
    sims = products(vecs, stacked(candidates, cols))
    out: dict[int, int] = {}
    for r, x in enumerate(rows):
        if mates[x]:
            out[x] = max(mates[x], key=lambda j: float(sims[r, at[j]]))
    return out


def superseded_pairs(
    candidates: Sequence[Candidate],
    prototypes: Prototypes,
    rule: SupersessionRule = SupersessionRule(),
    model: SlotModel | None = None,
) -> list[tuple[int, int]]:
    """``(older, newer)`` index pairs of ``candidates`` that state the same exclusive slot."""
    return kind_pairs(candidates, near_pairs(candidates, rule), prototypes, model, rule)


def present_order(
    candidates: Sequence[Candidate],
    prototypes: Prototypes,
    rule: SupersessionRule = SupersessionRule(),
    question: str | None = None,
) -> list[int]:
    """Indices of ``candidates`` best first for a question about the present
    (``rank_superseded`` over ``superseded_pairs``, after ``focus_scores`` given the ``question``)."""
    pairs = superseded_pairs(candidates, prototypes, rule)
    scores = [c.score for c in candidates] if question is None else focus_scores(candidates, question, pairs)
    return rank_superseded(scores, [c.valid_from for c in candidates], pairs)


def rank_superseded(
    scores: Sequence[float], valid_from: Sequence[int], pairs: Sequence[tuple[int, int]]
) -> list[int]:
    """Indices best first, given ``(older, newer)`` same-slot pairs (by ``effective_scores``)."""
    effective = effective_scores(scores, valid_from, pairs)
    # Ties keep the newer first.
    return sorted(range(len(effective)), key=lambda k: (-effective[k], -valid_from[k]))


def effective_scores(
    scores: Sequence[float], valid_from: Sequence[int], pairs: Sequence[tuple[int, int]]
) -> list[float]:
    """The scores the candidates rank by, given ``(older, newer)`` same-slot pairs.

    The newer of each pair takes the older's score when that is higher (oldest pairs
    first, so the newest version of a chain v1 < v2 < v3 ends with the best of the
    three); then each older version's score becomes just below the lowest of its
    supersessors' (newest resolved first), so the chain orders v3, v2, v1. Candidates
    in no pair keep their scores.
    """
    effective = [float(s) for s in scores]
    for older, newer in sorted(pairs, key=lambda p: (valid_from[p[0]], valid_from[p[1]])):
        effective[newer] = max(effective[newer], effective[older])
    newer_of: dict[int, list[int]] = {}
    for older, newer in pairs:
        newer_of.setdefault(older, []).append(newer)
    for i in sorted(newer_of, key=lambda k: valid_from[k], reverse=True):
        floor = min(effective[j] for j in newer_of[i])
        effective[i] = min(effective[i], float(np.nextafter(floor, -np.inf)))
    return effective
