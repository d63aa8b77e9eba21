"""How many values a question about the present asks for: one ("Which bank does Ada use?") or many. Pure.

Same-slot supersession (``core.supersession``) must decide, with no LLM, whether two
statements of one person hold one value at a time ("banks with Monzo" / "banks with
ING") or add up ("likes tea" / "likes coffee"). Its learned kind profiles
(``core.slot_model``) know the kinds they were fitted on; on kinds they never saw the
profiles spread and most updates are missed (``bench/temporal_misses.py``: rule 3 was
60% of the misses on the fresh wording families). The question itself often says it,
by English grammar rather than by any kind list: a question whose asked noun is
singular ("Which *bank* does ...", "Who is Ada's *dentist*?") expects one answer; one
whose noun is plural ("Which *languages* does ...", "What *podcasts* ...") expects
several. A question with no such noun ("What does Ada like?", "Where does Ada live?")
says nothing.

``asked_number`` reads that noun: the word before the first auxiliary after a leading
"which" / "what" ("Which board *games* does"), else the noun after a possessive
("Who is Ada's energy *supplier*?"; only after a copula: "Who does Ada's *taxes*?"
asks for one person). Plural: an English plural ending (``-s`` but not ``-ss``,
``-us``, ``-is``) or one of the irregular plurals. English only, like the time parser.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Literal, Protocol

from .names import leading_name, names_of, same_name

__all__ = ["Number", "asked_number", "asked_pairs", "plural_veto"]

Number = Literal["one", "many"] | None

_WORD = re.compile(r"[a-z][a-z'’-]*")
_AUX = frozenset(
    [
        "does",
        "do",
        "did",
        "is",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "can",
        "could",
        "will",
        "would",
        "should",
        "may",
        "might",
    ]
)
# Words that end the noun after a possessive ("Ada's employer *now*", "Ada's job *at* ...").
_AFTER = frozenset(
    [
        "now",
        "at",
        "in",
        "on",
        "these",
        "today",
        "currently",
        "these",
        "days",
        "then",
        "with",
        "for",
        "by",
        "to",
        "of",
    ]
)
_IRREGULAR = frozenset(
    [
        "children",
        "people",
        "men",
        "women",
        "teeth",
        "feet",
        "mice",
        "geese",
        "data",
        "media",
        "criteria",
        "phenomena",
    ]
)
_SINGULAR_ENDINGS = ("ss", "us", "is", "ics")


def _plural(noun: str) -> bool:
    return noun in _IRREGULAR or (noun.endswith("s") and not noun.endswith(_SINGULAR_ENDINGS))


@functools.lru_cache(maxsize=1024)
def asked_number(question: str) -> Number:
    """``"one"`` / ``"many"`` when the question's asked noun says how many values it expects, else None.

    Read only for a recall with a same-name pair (rule 3's candidates); cached by text.
    """
    words = [w.replace("’", "'") for w in _WORD.findall(question.lower())]
    if not words:
        return None
    if words[0] in ("which", "what"):
        for j in range(1, min(5, len(words))):
            if words[j] in _AUX:
                if j > 1:
                    return "many" if _plural(words[j - 1]) else "one"
                break
    # "Who is Ada's dentist?": the possessive's noun is the asked one only after a copula
    # ("Who does Ada's taxes?" asks for a person, whatever the number of "taxes").
    copula = words[0] in ("what's", "who's") or (len(words) > 1 and words[1] in ("is", "are", "was", "were"))
    for j, w in enumerate(words[:-1] if copula else ()):
        if w.endswith("'s") and w != "what's" and w != "who's":
            k = j + 1
            while k + 1 < len(words) and words[k + 1] not in _AUX and words[k + 1] not in _AFTER:
                k += 1
            return "many" if _plural(words[k]) else "one"
    return None


class _Statement(Protocol):
    @property
    def text(self) -> str: ...


def asked_pairs(
    candidates: Sequence[_Statement], pairs: Sequence[tuple[int, int]], question: str
) -> list[bool]:
    """Per pair of ``candidates``: both lead with a name ``question`` names (the asked entity's pair)."""
    names = names_of(question)

    @functools.cache
    def asked(i: int) -> bool:
        lead = leading_name(candidates[i].text)
        return bool(lead) and any(same_name(lead or "", n) for n in names)

    return [asked(o) and asked(n) for o, n in pairs]


def plural_veto(
    candidates: Sequence[_Statement], pairs: Sequence[tuple[int, int]], question: str
) -> list[tuple[int, int]]:
    """The ``pairs`` less those of the entity ``question`` names, when it asks for several values.

    A question about a many-valued attribute says so in English: its asked noun is
    plural ("Which *languages* does Ada speak?", "What *podcasts* ..."). Its answers are
    all current, so two statements of that person close to it are not versions of one
    slot, whatever rule 3 made of their kinds (the kind profiles miss kinds they were
    never fitted on). Measured through the public API (``bench/temporal_fresh.py``): false
    supersession on the second fresh family 4.4% -> 1.7%, current-first within 4
    questions on every family (``bench/results/temporal.md``, section G). A question
    asking for one value, or saying nothing, leaves the pairs to rule 3.
    """
    if not pairs or asked_number(question) != "many":
        return list(pairs)
    return [p for p, mine in zip(pairs, asked_pairs(candidates, pairs, question), strict=True) if not mine]
