"""The slot a one-value question asks about (core/slot_members.py), in a tiny hand-made space.

Axis 0 "bank", axis 1 "home", axis 2 "likes", axis 3 the person's name (shared by every
statement of one person). The member model here is hand-set so each feature can be
switched on and off; the shipped weights are measured in bench/train_slot_members.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from betterdb_memory.core.slot_members import (
    FEATURES,
    MEMBERS,
    MemberModel,
    focus_keys,
    member_features,
    question_slot_pairs,
    slot_members,
)
from betterdb_memory.core.slot_model import KindModel, SlotModel
from betterdb_memory.core.supersession import Candidate

BANK, HOME, LIKES, NAME = 0, 1, 2, 3


def _vec(*weights: float) -> np.ndarray:
    v = np.asarray(weights, dtype=np.float32)
    return v / np.linalg.norm(v)


def _model() -> SlotModel:
    """Kind profiles over bank, home, likes (the name axis carries no kind)."""
    kinds = KindModel(
        (8.0 * np.eye(4, 3)).astype(np.float32), np.zeros(3, np.float32), np.asarray([1, 1, 0], np.float32)
    )
    return SlotModel(kinds, None, 0.5)


#: Residual cosine and profile overlap count; everything else is switched off.
RESIDUAL = MemberModel(weights=(0.0, 10.0, 0.0, 10.0, 0.0, 0.0), bias=-15.0)

QUESTION = _vec(0.9, 0.0, 0.0, 0.45)  # "Which bank does Maya use?": bank, and the name


def _maya() -> list[Candidate]:
    """Maya's bank three times (the second worded apart), her home twice and two likes."""
    rows = [
        ("Maya banks with Monzo.", _vec(0.9, 0.05, 0, 0.4), 100),
        ("Maya lives in Porto.", _vec(0.05, 0.9, 0, 0.4), 150),
        ("Maya moved her account to Chase.", _vec(0.8, 0.15, 0.1, 0.4), 200),
        ("Maya likes tea.", _vec(0, 0.1, 0.9, 0.4), 250),
        ("Maya lives in Lyon.", _vec(0.1, 0.9, 0, 0.4), 300),
        ("Maya's bank is N26.", _vec(0.9, 0, 0.05, 0.4), 400),
        ("Maya likes coffee.", _vec(0.05, 0, 0.9, 0.4), 450),
    ]
    return [
        Candidate(f"m{i}", text, v, vf, float(v @ QUESTION), float(v @ QUESTION))
        for i, (text, v, vf) in enumerate(rows)
    ]


def test_focus_keys_is_the_offset_cosine_toward_the_question() -> None:
    vecs = np.stack([c.vector for c in _maya() if c.vector is not None])
    m = vecs.mean(axis=0)
    expected = [(v - m) @ (QUESTION - m) / np.linalg.norm(v - m) for v in vecs]
    got = focus_keys(vecs, vecs @ QUESTION)
    # The offsets' cosine times the constant |q - m|: computed from the similarities alone.
    assert np.allclose(got, expected, atol=1e-5)


def test_the_asked_statement_and_its_features() -> None:
    cands = _maya()
    vecs = np.stack([c.vector for c in cands if c.vector is not None])
    top, feats = member_features(vecs, vecs @ QUESTION, _model())
    assert cands[top].text.startswith("Maya banks with") or cands[top].text.startswith("Maya's bank")
    assert feats.shape == (len(cands), len(FEATURES))
    sim, residual, gap, overlap, rank, inverse = feats[top]
    assert sim == pytest.approx(1.0, abs=1e-5) and residual == pytest.approx(1.0, abs=1e-5)
    assert gap == 0.0 and overlap == pytest.approx(1.0, abs=1e-5)
    assert rank == 1.0 and inverse == pytest.approx(1 / len(cands))
    assert (feats[:, 2] >= 0).all()  # no statement points more toward the question than the asked one
    others = np.delete(feats[:, 4], top)
    assert sorted(others.tolist()) == pytest.approx([r / (len(cands) - 1) for r in range(len(cands) - 1)])


def test_the_bank_versions_are_the_slot_and_the_newest_wins() -> None:
    cands = _maya()
    vecs = np.stack([c.vector for c in cands if c.vector is not None])
    pairs = slot_members(cands, vecs, vecs @ QUESTION, _model(), RESIDUAL)
    assert pairs == [(0, 2), (0, 5), (2, 5)]  # Monzo, Chase, N26; not the homes or likes


def test_fewer_statements_than_the_rule_reads_give_nothing() -> None:
    cands = _maya()[:2]
    vecs = np.stack([c.vector for c in cands if c.vector is not None])
    assert slot_members(cands, vecs, vecs @ QUESTION, _model(), RESIDUAL) == []


def test_versions_written_at_one_instant_are_no_pair() -> None:
    cands = [Candidate(c.id, c.text, c.vector, 100, c.score, c.similarity) for c in _maya()]
    vecs = np.stack([c.vector for c in cands if c.vector is not None])
    assert slot_members(cands, vecs, vecs @ QUESTION, _model(), RESIDUAL) == []


def test_the_member_model_checks_its_width() -> None:
    with pytest.raises(ValueError, match="6 features"):
        MEMBERS.probabilities(np.zeros((2, 5), np.float32))
    assert len(MEMBERS.weights) == len(FEATURES)
    p = MEMBERS.probabilities(np.zeros((3, len(FEATURES)), np.float32))
    assert p.shape == (3,) and ((p > 0) & (p < 1)).all()


def _with_others() -> list[Candidate]:
    """Maya's statements between Bo's bank statements and a line with no leading name."""
    bo = [
        Candidate("b0", "Bo banks with Monzo.", _vec(0.9, 0, 0, -0.4), 120, 0.9, float(QUESTION[0] * 0.9)),
        Candidate("b1", "Bo's bank is ING.", _vec(0.85, 0, 0.1, -0.4), 500, 0.8, 0.7),
    ]
    nameless = Candidate("x", "banking is hard.", _vec(1, 0, 0, 0), 600, 0.7, 0.9)
    return [*bo, *_maya(), nameless]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Which bank does Maya use?", [(2, 4), (2, 7), (4, 7)]),  # Maya's three, shifted past Bo's
        ("Which banks does Maya use?", []),  # several values: not this rule's
        ("Where does Maya bank?", []),  # says nothing of how many
        ("Which bank does Cy use?", []),  # nobody here
    ],
)
def test_only_a_one_value_question_pairs_and_only_its_entity(
    question: str, expected: list[tuple[int, int]]
) -> None:
    assert question_slot_pairs(_with_others(), _model(), question, RESIDUAL) == expected


def test_a_candidate_without_a_vector_or_similarity_is_left_out() -> None:
    cands = _with_others()
    cands[4] = Candidate(cands[4].id, cands[4].text, None, cands[4].valid_from, 0.5)  # Chase
    assert question_slot_pairs(cands, _model(), "Which bank does Maya use?", RESIDUAL) == [(2, 7)]
