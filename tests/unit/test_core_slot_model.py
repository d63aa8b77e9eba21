"""The learned same-slot classifier (core/slot_model.py): its formula, its weights, who gets it."""

from __future__ import annotations

import numpy as np
import pytest

from betterdb_memory.core import slot_model
from betterdb_memory.core.slot_kinds import normalised
from betterdb_memory.core.slot_model import FITTED_MODEL_ID, SlotModel, for_model, pair_features


def _model(d: int = 6, seed: int = 0, threshold: float = 0.5) -> tuple[SlotModel, np.ndarray]:
    w = np.random.default_rng(seed).standard_normal(3 * d + 1).astype(np.float32)
    return SlotModel.of(w, threshold), w


def test_probabilities_are_the_logistic_model_on_the_pair_features() -> None:
    """The run-time formula (a weighted dot product plus each row's own part) is what was fitted."""
    model, w = _model()
    v = normalised(np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32))
    got = model.probabilities(v)
    i, j = np.triu_indices(5, 1)
    want = 1 / (1 + np.exp(-(pair_features(v[i], v[j]) @ w[:-1] + w[-1])))
    np.testing.assert_allclose(got[i, j], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, got.T, rtol=1e-5, atol=1e-6)  # symmetric in the pair


def test_same_slot_is_the_threshold_on_the_probability() -> None:
    model, _ = _model(threshold=0.7)
    v = normalised(np.random.default_rng(2).standard_normal((6, 6)).astype(np.float32))
    assert (model.same_slot(v) == (model.probabilities(v) >= 0.7)).all()


def test_weights_of_the_wrong_length_are_refused() -> None:
    with pytest.raises(ValueError):
        SlotModel.of(np.zeros(11), 0.5)


def test_the_shipped_weights_decode_for_the_shipped_embedder_only() -> None:
    """The weights live in MiniLM's space: any other embedder (or size) keeps the prototypes."""
    model = for_model(FITTED_MODEL_ID, 384)
    assert model is not None and model.dimensions == 384
    assert 0.0 < model.threshold < 1.0
    assert np.isfinite(model.pair).all() and np.isfinite(model.linear).all()
    assert for_model("openai:text-embedding-3-small", 384) is None
    assert for_model(FITTED_MODEL_ID, 768) is None
    assert slot_model.FITTED  # says what it was fitted on


def test_the_fitted_model_id_is_the_shipped_embedder_s() -> None:
    from betterdb_memory.embedders.onnx import MODEL_ID

    assert FITTED_MODEL_ID == MODEL_ID
