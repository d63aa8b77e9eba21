"""core.text: the tokens the hashing embedder and the re-ranker both see."""

from __future__ import annotations

from betterdb_memory.core.text import tokenize


def test_the_hashing_embedder_exports_the_same_tokenize() -> None:
    """``embedders.hashing.tokenize`` (public, in its ``__all__``) is this function, not a copy."""
    from betterdb_memory.embedders import hashing

    assert hashing.tokenize is tokenize
    assert "tokenize" in hashing.__all__


def test_tokenize_casefolds_and_normalises_compatibility_forms() -> None:
    """NFKC + casefold: full-width letters, ligatures and case variants are the same word."""
    assert tokenize("Straße ＡＢＣ ﬁne HELLO") == ["strasse", "abc", "fine", "hello"]


def test_tokenize_splits_scripts_without_spaces_into_characters() -> None:
    """Chinese and Japanese become characters (bigrams are added as features)."""
    assert tokenize("我喜欢苹果 and apples") == ["我", "喜", "欢", "苹", "果", "and", "apples"]
    assert tokenize("東京タワー") == ["東", "京", "タ", "ワ", "ー"]


def test_tokenize_keeps_combining_marks_inside_words() -> None:
    """Hindi vowel signs are not \\w; they must not cut a word into pieces."""
    assert tokenize("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert tokenize("naïve café") == ["naïve", "café"]


def test_tokenize_keeps_emoji_and_drops_punctuation() -> None:
    assert tokenize("😀 ok! ❤️ (yes)") == ["😀", "ok", "❤", "yes"]


def test_tokenize_ascii_shortcut_matches_the_unicode_path() -> None:
    """Every printable ASCII character, in random texts: the shortcut gives the same tokens."""
    import random
    import string

    from betterdb_memory.core.text import _tokenize_unicode

    rng = random.Random(7)
    alphabet = string.printable
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(2000)]
    texts += ["Don't stop: it's 3.5 km_away!", "snake_case __x__ A1B2", "\t\n\x0b\x0c\r", alphabet]
    for text in texts:
        assert text.isascii()
        assert tokenize(text) == _tokenize_unicode(text), text
