"""Token windows over a long text and the pooling of their vectors into one (pure, numpy only).

MiniLM was trained on at most 256 tokens, so ``OnnxEmbedder`` keeps a text's
first 256 by default and drops the rest: a long answer or a pasted document is
searchable by meaning only through its opening (BM25 sees all of it). With
``long_text="pool"`` the embedder cuts the whole text into windows of the
model's length, embeds each, and pools the window vectors into the memory's one
vector (the index keeps one vector per memory).

The windows are laid out so that a text that fits gives exactly the truncating
embedder's input, and a long text's first window is exactly its truncated input:

* every window of a long text is full (``width`` content tokens between
  ``[CLS]`` and ``[SEP]``), the first starting at token 0 and the last ending
  at the text's last token, the rest spread evenly between them, so no tail
  window of a few tokens weighs as much as a full one, and every window pads
  exactly like a truncated text in a length-sorted batch (a short text
  keeps its batch companions and so its vector, bit for bit);
* neighbouring windows overlap by at least ``overlap`` tokens, so a sentence
  cut by one window boundary is whole in the next window.

``bench/quality_long.py`` measured the layouts and poolings on LoCoMo sessions
stored as long memories (``bench/results/long-memories.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from .base import FloatMatrix, l2_normalize

__all__ = ["LONG_TEXT_MODES", "LongText", "pool_windows", "split_ids", "window_starts"]

LongText = Literal["pool", "truncate"]
LONG_TEXT_MODES: tuple[LongText, ...] = ("pool", "truncate")


def window_starts(n_tokens: int, width: int, overlap: int, max_windows: int | None = None) -> list[int]:
    """Start offsets of the windows covering ``n_tokens`` content tokens.

    One window (start 0) when the text fits. Otherwise the fewest full windows
    whose neighbours share at least ``overlap`` tokens, spread evenly from 0 to
    ``n_tokens - width`` (the actual overlap is ``overlap`` or a little more).
    When that takes more than ``max_windows``, ``max_windows`` windows spread the
    same way: they sample the text evenly (with gaps between them), so the cost
    of one text stays bounded.

    Raises:
        ValueError: ``width`` < 1, ``overlap`` not in ``0..width-1``, or
            ``max_windows`` < 2.
    """
    if width < 1 or not 0 <= overlap < width:
        raise ValueError(f"need width >= 1 and 0 <= overlap < width, got width={width}, overlap={overlap}")
    if max_windows is not None and max_windows < 2:
        raise ValueError(f"max_windows must be at least 2, got {max_windows}")
    if n_tokens <= width:
        return [0]
    last = n_tokens - width
    count = math.ceil(last / (width - overlap)) + 1
    if max_windows is not None:
        count = min(count, max_windows)
    # Integer arithmetic: the same offsets on every platform, the last exactly ``last``.
    return [(i * last) // (count - 1) for i in range(count)]


def split_ids(
    ids: Sequence[int], max_length: int, overlap: int, max_windows: int | None = None
) -> list[list[int]]:
    """Cut one encoded text (``[CLS] ... [SEP]``) into model inputs of at most ``max_length`` ids.

    A text of ``max_length`` ids or fewer is returned as is (one input, unchanged);
    a longer one as full windows of its content, each wrapped in the text's own
    ``[CLS]`` and ``[SEP]``. The first window equals the text truncated at
    ``max_length`` (what the tokenizer's truncation gives).

    ``max_windows``: as in ``window_starts``.

    Raises:
        ValueError: ``ids`` has fewer than 2 items (no ``[CLS]``/``[SEP]``), or
            ``max_length`` / ``overlap`` / ``max_windows`` leave no room for a window.
    """
    if len(ids) < 2:
        raise ValueError("an encoded text holds at least [CLS] and [SEP]")
    if len(ids) <= max_length:
        return [list(ids)]
    cls, content, sep = ids[0], ids[1:-1], ids[-1]
    width = max_length - 2
    return [
        [cls, *content[start : start + width], sep]
        for start in window_starts(len(content), width, overlap, max_windows)
    ]


def pool_windows(vectors: FloatMatrix) -> FloatMatrix:
    """One unit vector from a text's unit window vectors: their mean, renormalised.

    A single window is returned unchanged (the bits the truncating embedder gives). The mean of
    unit vectors keeps each window's say equal (every window is full), and points
    where most of the text points; ``bench/quality_long.py`` compares it with max
    pooling and with weighting by window length.
    """
    if len(vectors) == 1:
        return np.ascontiguousarray(vectors[0], dtype=np.float32)
    return l2_normalize(np.asarray(vectors, dtype=np.float32).mean(axis=0))
