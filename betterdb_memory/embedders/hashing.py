"""A deterministic, dependency-free embedder for tests and offline use.

``HashingEmbedder`` is *not* a semantic model: two texts are close only when they
share words (or, for CJK, characters). It exists so that users' own test suites,
CI without model files, and air-gapped demos can run the whole store with no
download and no extra: numpy is the only dependency, and the same text gives the
same vector in every process, on every machine, in every release of this
``model_id`` (``hashing-v1-<dims>``; a change to the features gets a new version).

How a text becomes a vector:

1. NFKC-normalise and casefold, so full-width, ligature and case variants of a
   word are one word.
2. Tokenise with ``re``'s Unicode ``\\w``, gluing combining marks back onto their
   word (``\\w`` does not match them, which would cut Hindi or Thai words at every
   vowel sign). A stand-alone symbol of category ``So`` (emoji, pictographs) is a
   token of its own.
3. Scripts written without spaces (Han, kana, Hangul, Thai, Lao, Khmer, Myanmar)
   become one token per character; step 4's bigrams then give the character
   bigrams that make Chinese searchable without a dictionary (the Lucene CJK
   analyser's approach).
4. Features are the token unigrams and adjacent bigrams, weighted by sublinear
   term frequency ``1 + ln(tf)``, and hashed into ``dimensions`` signed buckets
   (the signed "hashing trick": collisions cancel on average instead of adding up).
   The hash is keyed BLAKE2b, never ``hash()``, which is salted per process.
5. L2-normalise. A text with no tokens at all maps to one fixed unit vector (the
   store refuses zero vectors), so all such texts are identical to each other.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from ..core.text import tokenize
from .base import FloatMatrix, _check_positive_int, check_texts, l2_normalize

__all__ = ["HashingEmbedder", "tokenize"]

_EMPTY_FEATURE = "\x00empty"
# Bigrams count half a unigram: they add word order and CJK words, but a paraphrase
# reorders words, and at full weight they cost 3 of the 80 calibration pairs (see below).
_BIGRAM_WEIGHT = 0.5
_HASH_PERSON = b"bdbm-hash-v1"  # BLAKE2b personalisation: part of the model version
# Texts longer than this in total are hashed in a worker thread so the event loop
# stays responsive; below it the thread hop costs more than the work.
_OFFLOAD_CHARS = 50_000

# Calibrated on 40 paraphrase and 40 unrelated pairs (tests/unit/test_embedder_calibration.py),
# similarity = (1 + cos) / 2: unrelated pairs measured 0.405-0.622 (mean 0.523), paraphrases
# 0.622-0.974 (mean 0.780); 0.625 classifies 79/80, missing "I am allergic to peanuts." /
# "Peanuts give me an allergic reaction." (0.622). Unrelated pairs score high only by sharing
# function words ("before", "to"); paraphrases sharing no words would score like unrelated
# ones: this embedder cannot see them, which is why it is a test fallback, not a model.
DEFAULT_THRESHOLD = 0.625
# The re-ranked recall's gate margin (bench/results/quality-research.md). This embedder
# sees words, not topics: off-topic questions that share words still open the gate.
DEFAULT_MARGIN = 0.09


def _features(tokens: Sequence[str]) -> list[tuple[str, float]]:
    """(feature, weight) pairs: sublinear tf, bigrams at ``_BIGRAM_WEIGHT``."""
    unigrams = Counter("u" + t for t in tokens)
    bigrams = Counter("b" + a + "\x1f" + b for a, b in itertools.pairwise(tokens))
    if not unigrams:
        return [(_EMPTY_FEATURE, 1.0)]
    feats = [(f, 1.0 + math.log(tf)) for f, tf in unigrams.items()]
    feats.extend((f, _BIGRAM_WEIGHT * (1.0 + math.log(tf))) for f, tf in bigrams.items())
    return feats


@functools.lru_cache(maxsize=1 << 16)
def _feature_hash(feature: str) -> int:
    """64 stable bits per feature; cached because words repeat across texts."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_HASH_PERSON).digest()
    return int.from_bytes(digest, "little")


class HashingEmbedder:
    """Signed feature hashing of word and character n-grams (see the module docstring).

    A test and offline fallback: lexical overlap, not meaning. Use ``OnnxEmbedder``
    (extra ``onnx``) or ``OpenAIEmbedder`` for semantic recall.

    Args:
        dimensions: vector length; larger means fewer hash collisions.

    Raises:
        ConfigurationError: ``dimensions`` is not a positive integer.
    """

    default_threshold: float = DEFAULT_THRESHOLD
    default_margin: float = DEFAULT_MARGIN

    def __init__(self, dimensions: int = 384) -> None:
        _check_positive_int("dimensions", dimensions)
        self._dimensions = dimensions

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def model_id(self) -> str:
        return f"hashing-v1-{self._dimensions}"

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimensions={self._dimensions})"

    async def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """Embed ``texts``; float32 ``(len(texts), dimensions)``, every row unit length.

        Raises:
            ValidationError: ``texts`` is a bare ``str`` (pass ``[text]``) or holds a
                non-string.
        """
        items = check_texts(texts)
        if sum(len(t) for t in items) > _OFFLOAD_CHARS:
            return await asyncio.to_thread(self._embed_checked, items)
        return self._embed_checked(items)

    def embed_sync(self, texts: Sequence[str]) -> FloatMatrix:
        """The same as ``embed``, for synchronous callers (no I/O, pure CPU)."""
        return self._embed_checked(check_texts(texts))

    def _embed_checked(self, texts: list[str]) -> FloatMatrix:
        out = np.zeros((len(texts), self._dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in _features(tokenize(text)):
                h = _feature_hash(feature)
                out[row, h % self._dimensions] += weight if h >> 63 else -weight
        return l2_normalize(out)
