"""The learned rule 3 (core/slot_model.py): kind profiles, the veto, their weights, who gets them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from betterdb_memory.core import slot_model
from betterdb_memory.core.slot_kinds import normalised
from betterdb_memory.core.slot_model import (
    FITTED_MODEL_ID,
    KindModel,
    SlotModel,
    Veto,
    for_model,
    load,
    pair_features,
)


def _rows(n: int, d: int = 6, seed: int = 1) -> np.ndarray:
    return normalised(np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32))


def _kinds(d: int = 6, k: int = 4, seed: int = 0) -> KindModel:
    rng = np.random.default_rng(seed)
    return KindModel(
        (3 * rng.standard_normal((d, k))).astype(np.float32),
        rng.standard_normal(k).astype(np.float32),
        np.asarray([1, 1, 0, 0], dtype=np.float32)[:k],
        tuple(f"k{i}" for i in range(k)),
    )


def test_profiles_are_a_softmax_over_kinds() -> None:
    model = _kinds()
    v = _rows(5)
    z = v @ model.weights + model.bias
    want = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model.profiles(v), want, rtol=1e-5, atol=1e-6)


def test_the_score_is_the_exclusive_part_of_the_profiles_cosine() -> None:
    """sum_k p_k q_k e_k / (|p| |q|): symmetric; two profiles on one many-valued kind score 0."""
    model = _kinds()
    p = model.profiles(_rows(6))
    left, right = np.asarray([0, 1, 2]), np.asarray([3, 4, 5])
    want = [
        float(p[i] * p[j] @ model.exclusive) / (np.linalg.norm(p[i]) * np.linalg.norm(p[j]))
        for i, j in zip(left, right, strict=True)
    ]
    np.testing.assert_allclose(model.scores(p, left, right), want, rtol=1e-5)
    np.testing.assert_allclose(model.scores(p, right, left), want, rtol=1e-5)
    many = np.asarray([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.9, 0.1]], dtype=np.float32)
    assert model.scores(many, np.asarray([0]), np.asarray([1]))[0] == pytest.approx(0.0)


def test_the_overlap_is_the_profiles_cosine_over_every_kind() -> None:
    """p . q / (|p| |q|): two profiles on one many-valued kind overlap fully (the exclusive score: 0)."""
    model = _kinds()
    p = model.profiles(_rows(6))
    left, right = np.asarray([0, 1, 2]), np.asarray([3, 4, 5])
    want = [
        float(p[i] @ p[j]) / (np.linalg.norm(p[i]) * np.linalg.norm(p[j]))
        for i, j in zip(left, right, strict=True)
    ]
    np.testing.assert_allclose(model.overlaps(p, left, right), want, rtol=1e-5)
    many = np.asarray([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0]], dtype=np.float32)
    assert model.overlaps(many, np.asarray([0]), np.asarray([1]))[0] == pytest.approx(1.0)


def test_the_name_a_kind_model_has_learned_away_does_not_move_the_score() -> None:
    """A direction the kind weights ignore (as a person's name is, once learned) changes no profile."""
    model = _kinds()
    w = model.weights.copy()
    w[0] = 0.0  # axis 0 carries no kind
    blind = KindModel(w, model.bias, model.exclusive)
    v = _rows(4)
    named = v.copy()
    named[:, 0] += 5.0  # the same name on every statement
    np.testing.assert_allclose(blind.profiles(named), blind.profiles(v), rtol=1e-5)


def test_the_veto_is_the_first_round_logistic_on_the_pair_features() -> None:
    w = np.random.default_rng(3).standard_normal(3 * 6 + 1).astype(np.float32)
    veto = Veto.of(w, 0.5)
    a, b = _rows(5, seed=4), _rows(5, seed=5)
    want = 1 / (1 + np.exp(-(pair_features(a, b) @ w[:-1] + w[-1])))
    np.testing.assert_allclose(veto.probabilities(a, b), want, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(veto.probabilities(a, b), veto.probabilities(b, a), rtol=1e-5)
    with pytest.raises(ValueError):
        Veto.of(np.zeros(11), 0.5)


def test_same_slot_needs_the_score_and_the_veto() -> None:
    kinds = _kinds()
    v = _rows(8, seed=6)
    left, right = [0, 1, 2, 3], [4, 5, 6, 7]
    score = kinds.scores(kinds.profiles(v), np.asarray(left), np.asarray(right))
    threshold = float(np.median(score))
    alone = SlotModel(kinds, None, threshold)
    np.testing.assert_array_equal(alone.same_slot(v, left, right), score >= threshold)
    never = Veto.of([0.0] * 18 + [-50.0], 0.5)
    assert not SlotModel(kinds, never, threshold).same_slot(v, left, right).any()
    always = Veto.of([0.0] * 18 + [50.0], 0.5)
    np.testing.assert_array_equal(
        SlotModel(kinds, always, threshold).same_slot(v, left, right), score >= threshold
    )


def test_a_saved_model_loads_back(tmp_path: Path) -> None:
    kinds = _kinds()
    path = tmp_path / "m.npz"
    np.savez(
        path, kind_w=kinds.weights.astype(np.float16), kind_b=kinds.bias, kind_exclusive=kinds.exclusive,
        kind_names=np.asarray(kinds.kinds), veto_w=np.zeros(19, dtype=np.float32), veto_threshold=np.float32(0.1),
        threshold=np.float32(0.6), fitted=np.str_("test"),
    )  # fmt: skip
    back = load(path)
    assert back.threshold == pytest.approx(0.6) and back.fitted == "test" and back.dimensions == 6
    assert back.veto is not None and back.veto.threshold == pytest.approx(0.1)
    assert back.kinds.kinds == kinds.kinds
    np.testing.assert_allclose(back.kinds.weights, kinds.weights, rtol=1e-3, atol=1e-3)


def test_a_model_whose_parts_disagree_is_refused(tmp_path: Path) -> None:
    kinds = _kinds()
    path = tmp_path / "m.npz"
    np.savez(
        path, kind_w=kinds.weights, kind_b=kinds.bias, kind_exclusive=kinds.exclusive,
        kind_names=np.asarray(kinds.kinds), veto_w=np.zeros(3 * 5 + 1, dtype=np.float32),
        veto_threshold=np.float32(0.1), threshold=np.float32(0.6), fitted=np.str_("test"),
    )  # fmt: skip
    with pytest.raises(ValueError):
        load(path)


def test_the_shipped_weights_load_for_the_shipped_embedder_only() -> None:
    """The weights live in MiniLM's space: any other embedder (or size) keeps the prototypes."""
    model = for_model(FITTED_MODEL_ID, 384)
    assert model is not None and model.dimensions == 384
    assert 0.0 < model.threshold < 1.0 and model.veto is not None and 0.0 < model.veto.threshold < 1.0
    assert np.isfinite(model.kinds.weights).all() and np.isfinite(model.veto.pair).all()
    assert len(model.kinds.kinds) == len(model.kinds.exclusive) > 50
    assert for_model("openai:text-embedding-3-small", 384) is None
    assert for_model(FITTED_MODEL_ID, 768) is None
    assert model.fitted  # says what it was fitted on
    assert slot_model.WEIGHTS_FILE.stat().st_size < 200_000  # package data stays small


def test_the_fitted_model_id_is_the_shipped_embedder_s() -> None:
    from betterdb_memory.embedders.onnx import MODEL_ID

    assert FITTED_MODEL_ID == MODEL_ID
