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
"which" / "what" ("Which board *games* does"; a leading preposition is dropped: "*In*
which city is ..."), or the subject of the verb when no auxiliary follows ("Which
*firm* employs Ada?", read only when the verb agrees with it), else the noun after a
possessive ("Who is Ada's energy *supplier*?"; only after a copula). Plural: an English
plural ending (``-s`` but not ``-ss``, ``-us``, ``-is``) or one of the irregular plurals.
Two forms with no asked noun read as one value too: "who" as the verb's subject with
the person as its object ("Who *trains* Ada?", "Who *does* Ada's taxes?": who holds a
role toward them, asked of one) and an amount ("How much ..."). "Who does Ada train
with?" and "How many ...?" say nothing. English only, like the time parser.

Measured offline on the training families (``bench/slot_offline.py``, round
questionform): current-first +0.7 to +4.2 points on four of five, false supersession
unchanged; ``bench/results/temporal.md`` section I has the public API's figures.
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
# A question may open with the preposition its "which" governs ("*In* which city ...").
_PREPOSITIONS = frozenset(["in", "at", "on", "for", "with", "from", "to", "by", "of", "under"])
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


def _subject_who(words: list[str]) -> Number:
    """Who holds a role toward the named person ("Who *trains* Ada?", "Who does Ada's *taxes*?").

    "Who" is then the verb's subject and the named person its object: the question asks
    who holds a role toward them (a trainer, an insurer), and English asks that of one.
    "Who does Ada train with?" (the person is the subject), "Who is Ada close to?" and
    "Who lives *with* Ada?" (a preposition: the person is not the verb's object) say
    nothing: many people may answer them.
    """
    if len(words) < 3:
        return None
    verb = words[1]
    if verb not in _AUX:
        if words[2] in _PREPOSITIONS:
            return None
        return "one" if verb.endswith("s") and not verb.endswith("ss") and verb.isalpha() else None
    if verb != "does":
        return None
    # "Who does Ada's taxes?": "does" is the verb when the person's possessive and one noun follow.
    for j in range(2, len(words) - 1):
        if words[j].endswith("'s"):
            rest = [w for w in words[j + 1 :] if w not in _AFTER]
            return "one" if len(rest) == 1 else None
    return None


def _subject_noun(words: list[str], question: str) -> Number:
    """A "which" question whose noun is the verb's subject: "Which *firm* employs Ada?".

    No auxiliary follows the noun, so the word before the named person is the verb and
    the one before it the noun; the verb must agree with it (``-s`` after a singular
    noun, the bare form after a plural), else nothing is read ("What happened to Ada?").
    """
    firsts = {name.split()[0] for name in names_of(question)}
    at = next((i for i, w in enumerate(words) if w.removesuffix("'s") in firsts), None)
    if at is None or at < 3:
        return None
    noun, verb = words[at - 2], words[at - 1]
    if verb in _AFTER or verb in _PREPOSITIONS or not verb.isalpha():
        return None
    if _plural(noun):
        return "many" if not verb.endswith("s") else None
    return "one" if verb.endswith("s") and not verb.endswith("ss") else None


@functools.lru_cache(maxsize=1024)
def asked_number(question: str) -> Number:
    """``"one"`` / ``"many"`` when the question's asked noun says how many values it expects, else None.

    Read only for a recall with a same-name pair (rule 3's candidates); cached by text.
    """
    words = [w.replace("’", "'") for w in _WORD.findall(question.lower())]
    if len(words) > 1 and words[0] in _PREPOSITIONS and words[1] in ("which", "what"):
        words = words[1:]  # "In which city is Ada based?" asks what "Which city is ..." asks
    if not words:
        return None
    if words[0] == "who" and (agent := _subject_who(words)) is not None:
        return agent
    if words[0] == "how" and len(words) > 2 and words[1] == "much":
        return "one"  # an amount ("How much does Ada pay for rent?"); "how many" may count many values
    if words[0] in ("which", "what"):
        for j in range(1, min(5, len(words))):
            if words[j] in _AUX:
                if j > 1:
                    return "many" if _plural(words[j - 1]) else "one"
                break
        else:
            return _subject_noun(words, question)
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
