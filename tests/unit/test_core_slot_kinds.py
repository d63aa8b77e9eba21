"""The vocabulary of same-slot supersession (core/slot_kinds.py): kinds, prototypes, kind scores."""

from __future__ import annotations

import numpy as np

from betterdb_memory.core.slot_kinds import (
    EXCLUSIVE_KINDS,
    MANY_KINDS,
    Prototypes,
    normalised,
    products,
    prototype_texts,
)


def test_common_personal_attributes_have_a_kind() -> None:
    """A kind missing from the tables is never superseded: the everyday ones must be there."""
    for kind in ("home", "employer", "job", "partner", "bank", "doctor", "team"):
        assert kind in EXCLUSIVE_KINDS
    for kind in ("likes", "languages", "friends", "sports", "cooking", "health"):
        assert kind in MANY_KINDS


def test_no_prototype_sentence_is_in_two_kinds() -> None:
    texts, _kinds = prototype_texts()
    assert len(texts) == len(set(texts))
    assert all(len(sentences) >= 1 for sentences in (*EXCLUSIVE_KINDS.values(), *MANY_KINDS.values()))


def test_kind_scores_are_the_best_cosine_per_kind() -> None:
    kinds = ["home", "home", "likes", "employer"]
    rows = np.asarray([[1, 0, 0], [0.6, 0.8, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    p = Prototypes.of(rows, kinds)
    assert p.kinds == ("home", "likes", "employer")
    assert p.exclusive.tolist() == [True, False, True]
    got = p.kind_scores(np.asarray([[0, 2, 0]], dtype=np.float32))  # not normalised: it is
    np.testing.assert_allclose(got, [[0.8, 1.0, 0.0]], atol=1e-6)


def test_products_in_blocks_are_the_plain_product() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((50, 8)).astype(np.float32)
    b = rng.standard_normal((7, 8)).astype(np.float32)
    np.testing.assert_allclose(products(a, b), a @ b.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(products(a[:3], b), a[:3] @ b.T, rtol=1e-5, atol=1e-5)


def test_normalised_leaves_a_zero_row_at_zero() -> None:
    out = normalised(np.asarray([[3, 4], [0, 0]], dtype=np.float32))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0, 0]])
