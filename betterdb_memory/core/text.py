"""How a text becomes the words that matching compares: tokens, and English inflections folded.

The hashing embedder (``embedders.hashing``) hashes ``tokenize``'s tokens, and the
re-ranker (``core.ranking``) matches queries and memories on them, so both see the same
words. Pure functions: no I/O, no state beyond regular expressions.

``tokenize``:

1. NFKC-normalise and casefold, so full-width, ligature and case variants of a
   word are one word.
2. Split with ``re``'s Unicode ``\\w``, gluing combining marks back onto their
   word (``\\w`` does not match them, which would cut Hindi or Thai words at every
   vowel sign). A stand-alone symbol of category ``So`` (emoji, pictographs) is a
   token of its own.
3. Scripts written without spaces (Han, kana, Hangul, Thai, Lao, Khmer, Myanmar)
   become one token per character.

``fold_suffix``: Porter's steps 1 and 5a on ASCII words (``paintings`` / ``painted`` /
``painting`` -> ``paint``), the re-ranker's term folding.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["fold_suffix", "tokenize"]

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
    """The words of a text, as the hashing embedder and the re-ranker see them (module docstring).

    Exposed (also as ``embedders.hashing.tokenize``) so that tests, and users wondering
    why two texts do not match, can see it.
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


def _consonant(word: str, i: int) -> bool:
    """Porter's consonant: not a vowel, and ``y`` only when after a vowel (or first)."""
    ch = word[i]
    if ch in "aeiou":
        return False
    return ch != "y" or i == 0 or not _consonant(word, i - 1)


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in ``stem``."""
    m, after_vowel = 0, False
    for i in range(len(stem)):
        vowel = not _consonant(stem, i)
        if after_vowel and not vowel:
            m += 1
        after_vowel = vowel
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _consonant(stem, i) for i in range(len(stem)))


def _cvc(stem: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (``hop``, not ``hoop``)."""
    n = len(stem)
    return (
        n >= 3
        and _consonant(stem, n - 3)
        and not _consonant(stem, n - 2)
        and _consonant(stem, n - 1)
        and stem[-1] not in "wxy"
    )


def fold_suffix(word: str) -> str:
    """Porter stemmer steps 1a, 1b, 1c and 5a (plurals, -ed, -ing, y, final e), ASCII words only.

    Not the whole Porter algorithm on purpose: the derivational steps (-ation,
    -ness, -ful...) merge words whose meanings differ, and a re-ranker needs word
    forms to meet, not linguistics. Applied alike to queries and memories, it only
    has to map a word's inflections to one key: ``painted``/``painting``/``paints``
    -> ``paint``, ``loved``/``love`` -> ``love``, ``planes`` -> ``plane`` but
    ``planning`` -> ``plan``. Other scripts, and words with digits or 3 letters or
    fewer, are returned unchanged.
    """
    if len(word) <= 3 or not (word.isascii() and word.isalpha()):
        return word
    # 1a: plurals.
    if word.endswith(("sses", "ies")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    # 1b: -eed, -ed, -ing; then repair the stem (hop(p)ing -> hop, hoping -> hope).
    if word.endswith("eed"):
        if _measure(word[:-3]) > 0:
            word = word[:-1]
    else:
        for suffix in ("ed", "ing"):
            stem = word[: -len(suffix)]
            if word.endswith(suffix) and _has_vowel(stem):
                word = stem
                if word.endswith(("at", "bl", "iz")):
                    word += "e"
                elif len(word) >= 2 and word[-1] == word[-2] and _consonant(word, len(word) - 1):
                    if word[-1] not in "lsz":
                        word = word[:-1]
                elif _measure(word) == 1 and _cvc(word):
                    word += "e"
                break
    # 1c: a final y after a vowel-bearing stem (happy, happier's stem) -> i.
    if word.endswith("y") and _has_vowel(word[:-1]):
        word = word[:-1] + "i"
    # 5a: a final e, unless the stem is short and ends consonant-vowel-consonant.
    if word.endswith("e"):
        m = _measure(word[:-1])
        if m > 1 or (m == 1 and not _cvc(word[:-1])):
            word = word[:-1]
    return word
