"""Token windows of a long text and their pooling (``embedders/onnx_windows.py``), no model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from betterdb_memory.embedders.onnx_windows import pool_windows, split_ids, window_starts

CLS, SEP = 101, 102


def encoded(n_content: int) -> list[int]:
    """An encoded text: [CLS], ``n_content`` distinct content ids, [SEP]."""
    return [CLS, *range(1000, 1000 + n_content), SEP]


def test_a_text_that_fits_is_one_window_starting_at_zero() -> None:
    assert window_starts(0, 254, 32) == [0]
    assert window_starts(254, 254, 32) == [0]


def test_one_token_over_takes_two_windows_the_last_ending_at_the_end() -> None:
    assert window_starts(255, 254, 32) == [0, 1]


def test_windows_are_spread_evenly_and_overlap_at_least_as_asked() -> None:
    # 700 tokens, width 254, overlap >= 32: stride at most 222 -> ceil(446 / 222) + 1 = 4 windows.
    starts = window_starts(700, 254, 32)
    assert starts == [0, 148, 297, 446]
    assert all(b - a <= 254 - 32 for a, b in itertools.pairwise(starts))


def test_no_overlap_asked_gives_the_fewest_windows() -> None:
    assert window_starts(508, 254, 0) == [0, 254]
    assert window_starts(509, 254, 0) == [0, 127, 255]


def test_more_windows_than_the_cap_sample_the_text_evenly() -> None:
    starts = window_starts(100_000, 254, 32, max_windows=64)
    assert len(starts) == 64
    assert starts[0] == 0 and starts[-1] == 100_000 - 254
    gaps = {b - a for a, b in itertools.pairwise(starts)}
    assert max(gaps) - min(gaps) <= 1


def test_the_cap_does_not_touch_texts_under_it() -> None:
    assert window_starts(700, 254, 32, max_windows=64) == window_starts(700, 254, 32)


@pytest.mark.parametrize(
    ("width", "overlap", "cap"), [(0, 0, None), (10, 10, None), (10, -1, None), (10, 2, 1)]
)
def test_impossible_layouts_are_refused(width: int, overlap: int, cap: int | None) -> None:
    with pytest.raises(ValueError):
        window_starts(100, width, overlap, cap)


@given(
    n=st.integers(min_value=0, max_value=5_000),
    width=st.integers(min_value=1, max_value=300),
    data=st.data(),
)
def test_windows_cover_every_token_with_the_overlap_asked(n: int, width: int, data: st.DataObject) -> None:
    overlap = data.draw(st.integers(min_value=0, max_value=width - 1))
    starts = window_starts(n, width, overlap)
    assert starts[0] == 0
    assert starts == sorted(set(starts))
    if n <= width:
        assert starts == [0]
        return
    assert starts[-1] == n - width  # every window is full; the last ends at the last token
    assert all(width - (b - a) >= overlap for a, b in itertools.pairwise(starts))
    # The fewest windows that do it: one fewer could not keep the overlap.
    assert len(starts) == 2 or (n - width) / (len(starts) - 2) > width - overlap


def test_a_text_that_fits_is_returned_as_it_is() -> None:
    ids = encoded(254)
    windows = split_ids(ids, 256, 32)
    assert windows == [ids]
    assert windows[0] is not ids  # a copy: the caller's list is never shared


def test_the_first_window_is_the_text_truncated_at_max_length() -> None:
    ids = encoded(700)
    windows = split_ids(ids, 256, 32)
    assert windows[0] == [*ids[:255], SEP]


def test_every_window_is_full_and_wrapped_in_the_texts_own_cls_and_sep() -> None:
    ids = encoded(700)
    windows = split_ids(ids, 256, 32)
    assert len(windows) == 4
    assert all(len(w) == 256 and w[0] == CLS and w[-1] == SEP for w in windows)
    assert windows[-1][1:-1] == ids[-255:-1]  # the last window holds the text's last tokens
    covered = {t for w in windows for t in w[1:-1]}
    assert covered == set(ids[1:-1])  # nothing of the text is left out


def test_an_encoding_without_cls_and_sep_is_refused() -> None:
    with pytest.raises(ValueError):
        split_ids([CLS], 256, 32)


def test_one_window_vector_is_returned_bit_for_bit() -> None:
    v = np.array([[0.6, 0.8, 0.0]], dtype=np.float32)
    out = pool_windows(v)
    assert out.dtype == np.float32
    assert out.tobytes() == v[0].tobytes()


def test_several_windows_pool_to_their_renormalised_mean() -> None:
    a = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    b = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    c = np.array([0.0, 0.0, 1.0], dtype=np.float32)
    out = pool_windows(np.vstack([a, b, b, c]))
    np.testing.assert_allclose(out, np.array([1, 2, 1], dtype=np.float32) / np.sqrt(6), rtol=1e-6)
    assert out.dtype == np.float32
    assert float(np.linalg.norm(out)) == pytest.approx(1.0, abs=1e-6)
