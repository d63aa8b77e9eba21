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
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

import numpy as np

from .base import FloatMatrix, _check_positive_int, check_texts, l2_normalize

__all__ = ["HashingEmbedder", "tokenize"]

_WORD_OR_SYMBOL = re.compile(r"\w+|[^\w\s]")
_ASCII_WORD = re.compile(r"[a-z0-9_]+")
# Scripts written without spaces between words; each character becomes a token.
_NO_SPACE_SCRIPT = re.compile(
    "["
    "\u0e00-\u0eff"  # Thai, Lao
    "\u1000-\u109f"  # Myanmar
    "\u1100-\u11ff"  # Hangul Jamo
    "\u1780-\u17ff"  # Khmer
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3005-\u3007\u3021-\u3029\u3038-\u303b"  # ideographic iteration marks and numerals
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003ffff"  # CJK extensions B and later
    "]+"
)
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


def _is_mark(ch: str) -> bool:
    return unicodedata.category(ch)[0] == "M"


def _split_graphemes(run: str) -> list[str]:
    """Characters of a no-space run, each with its combining marks (Thai vowel signs)."""
    out: list[str] = []
    for ch in run:
        if out and _is_mark(ch):
            out[-1] += ch
        else:
            out.append(ch)
    return out


def tokenize(text: str) -> list[str]:
    """The token stream the hashing embedder sees (steps 1-3 of the module docstring).

    Exposed so that tests, and users wondering why two texts do not match, can see it.
    ASCII text takes a shortcut with the same result (NFKC and casefold are ``lower``
    there, and it has no marks, no symbols of category So and no spaceless scripts):
    recall's re-ranker tokenises every candidate.
    """
    if text.isascii():
        return _ASCII_WORD.findall(text.lower())
    return _tokenize_unicode(text)


def _tokenize_unicode(text: str) -> list[str]:
    norm = unicodedata.normalize("NFKC", text).casefold()
    words: list[str] = []
    last_end = -1
    for m in _WORD_OR_SYMBOL.finditer(norm):
        piece = m.group()
        first = piece[0]
        is_word = first.isalnum() or first == "_"  # exactly what \w matches in a str pattern
        is_mark = _is_mark(first)
        glued = words and m.start() == last_end and (is_mark or (is_word and _is_mark(words[-1][-1])))
        if glued:
            words[-1] += piece  # a combining mark, and the letters after it, stay in the word
            last_end = m.end()
        elif is_word:
            words.append(piece)
            last_end = m.end()
        else:
            # A stand-alone symbol (emoji) is a token; punctuation, and marks with no
            # letter to sit on (an emoji's variation selector), are not.
            if not is_mark and unicodedata.category(first) == "So":
                words.append(piece)
            last_end = -1
    tokens: list[str] = []
    for word in words:
        start = 0
        for run in _NO_SPACE_SCRIPT.finditer(word):
            if run.start() > start:
                tokens.append(word[start : run.start()])
            tokens.extend(_split_graphemes(run.group()))
            start = run.end()
        if start < len(word):
            tokens.append(word[start:])
    return tokens


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
