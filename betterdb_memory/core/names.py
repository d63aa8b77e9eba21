"""Names in a text, for telling whether two statements are about the same entity. Pure.

Used by same-slot supersession (``core.supersession``, rule 1): two statements are about
the same entity when their leading names, their subjects in English word order, are
the same name. A name is a run of adjacent capitalised words that are not sentence
starters, or a number other than a year; "I", "me", "my" and "the user" are the name
``<self>``. No tagger, no model: the rule must run on every recall in microseconds.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence

__all__ = [
    "SELF_NAME",
    "leading_name",
    "name_groups",
    "name_mates",
    "name_runs",
    "names_of",
    "namesake",
    "same_name",
]

# Words that start sentences in capitals without being names.
_NOT_NAMES = frozenset(
    [
        "the",
        "a",
        "an",
        "he",
        "she",
        "they",
        "it",
        "we",
        "you",
        "his",
        "her",
        "their",
        "its",
        "our",
        "your",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "where",
        "when",
        "why",
        "how",
        "there",
        "here",
        "then",
        "now",
        "today",
        "yesterday",
        "tomorrow",
        "also",
        "but",
        "and",
        "or",
        "so",
        "if",
        "after",
        "before",
        "since",
        "until",
        "while",
        "as",
        "at",
        "in",
        "on",
        "of",
        "for",
        "from",
        "to",
        "with",
        "by",
        "about",
        "into",
        "over",
        "under",
        "last",
        "next",
        "every",
        "each",
        "some",
        "many",
        "most",
        "all",
        "both",
        "just",
        "still",
        "yet",
        "once",
        "mr",
        "mrs",
        "ms",
        "dr",
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
    ]
)
_SELF = frozenset(["i", "me", "my", "mine", "myself", "i'm", "i've", "i'd", "i'll", "user", "user's"])
_TOKEN = re.compile(r"[A-Za-z][\w'’-]*|\d+(?:[.,]\d+)?")
_YEAR = re.compile(r"(?:19|2[01])\d\d")
SELF_NAME = "<self>"

# A diary line has no subject ("Went hiking with Sara.", "Had dinner at Nopa."): its
# first word is a verb, capitalised as a sentence starter, and must not become the
# line's name (every "Went ..." would be one entity). Common verbs that start such
# lines, past and present; a first word ending in "-ed" followed by a function word
# ("Presented the roadmap", "Hiked up the hill") is taken for one too. A name that
# happens to end in -ed ("Ahmed moved") is followed by its verb, not a function word.
_VERBS = frozenset(
    [
        "went",
        "go",
        "goes",
        "had",
        "has",
        "have",
        "got",
        "get",
        "gets",
        "took",
        "take",
        "takes",
        "spent",
        "spend",
        "bought",
        "buy",
        "ate",
        "eat",
        "did",
        "do",
        "does",
        "made",
        "make",
        "makes",
        "met",
        "meet",
        "saw",
        "see",
        "read",
        "wrote",
        "write",
        "swam",
        "swim",
        "ran",
        "run",
        "drove",
        "drive",
        "flew",
        "fly",
        "rode",
        "ride",
        "sent",
        "send",
        "gave",
        "give",
        "found",
        "find",
        "left",
        "leave",
        "kept",
        "keep",
        "paid",
        "pay",
        "sold",
        "sell",
        "won",
        "win",
        "lost",
        "lose",
        "slept",
        "sleep",
        "drank",
        "drink",
        "sang",
        "sing",
        "began",
        "begin",
        "came",
        "come",
        "brought",
        "bring",
        "thought",
        "think",
        "told",
        "tell",
        "felt",
        "feel",
        "heard",
        "hear",
        "caught",
        "catch",
        "taught",
        "teach",
        "fed",
        "built",
        "build",
        "cut",
        "put",
        "set",
        "let",
        "hit",
        "finished",
        "played",
        "grabbed",
        "started",
        "tried",
        "watched",
        "called",
        "visited",
        "cooked",
        "walked",
        "worked",
        "booked",
        "ordered",
        "picked",
        "cleaned",
        "fixed",
        "moved",
        "joined",
        "signed",
        "baked",
    ]
)
_FUNCTION_WORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "to",
        "at",
        "in",
        "on",
        "with",
        "for",
        "my",
        "our",
        "his",
        "her",
        "their",
        "some",
        "up",
        "out",
        "off",
        "back",
        "over",
        "through",
        "around",
        "into",
        "from",
        "about",
        "by",
        "two",
        "three",
    ]
)
_NEXT_WORD = re.compile(r"\s+([A-Za-z]+)")


def _sentence_verb(text: str, low: str, end: int) -> bool:
    """The text's first word ``low`` is a verb starting a subjectless line (see ``_VERBS``)."""
    if low in _VERBS:
        return True
    if not low.endswith("ed") or len(low) < 5:
        return False
    nxt = _NEXT_WORD.match(text, end)
    return nxt is not None and nxt.group(1) in _FUNCTION_WORDS


@functools.lru_cache(maxsize=4096)
def names_of(text: str) -> frozenset[str]:
    """The names in a text, case-folded, as runs of adjacent name words ("ada moreau").

    See ``name_runs`` (the same names, in text order). Cached by text: a recall's
    question is read by ``vector_needs``, ``focus_scores`` and the question's rules.
    """
    return frozenset(name_runs(text))


@functools.lru_cache(maxsize=8192)
def leading_name(text: str) -> str | None:
    """The first name of a text: its subject, in English word order ("Ada moved to Berlin").

    A subjectless line ("Had dinner at Nopa with Ines.", a diary's) has none: its first
    name is a place or a companion, not its subject, and two such events would be taken
    for one entity's changing attribute; with no leading name a statement is never
    superseded (the rule fails safe). Cached by text (a pure function): a store's
    recalls meet the same memories again.
    """
    first = _TOKEN.search(text)
    if first is not None:
        tok = first.group(0)
        if tok[0].isupper() and _sentence_verb(text, tok.lower(), first.end()):
            return None
    return next(_runs(text), None)


def name_runs(text: str) -> list[str]:
    """The names in a text, case-folded, in order, as runs of adjacent name words ("ada moreau").

    Name words are capitalised words that are not sentence starters ("The", "What",
    "Since"), numbers other than years, and ``<self>`` for the user ("I", "my", "the
    user"). Words next to each other (only spaces between) form one name, so "Greta
    Zeller" and "Greta Ashby" are two names, not one shared "greta". Possessives are cut
    ("Ada's" -> "ada") and end the run.
    """
    return list(_runs(text))


def _runs(text: str) -> Iterator[str]:
    """``name_runs`` lazily: each name as soon as it is complete (``leading_name`` stops at one)."""
    run: list[str] = []
    last_end = -2
    first = True
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        at_start, first = first, False
        low = tok.lower().replace("’", "'")
        if low in _SELF or (low == "user" and text[max(0, m.start() - 4) : m.start()].lower() == "the "):
            if run:
                yield " ".join(run)
                run = []
            yield SELF_NAME
            last_end = -2
            continue
        possessive = low.endswith("'s")
        if possessive:
            low = low[:-2]
        is_name = not _YEAR.fullmatch(low) and (
            tok[0].isdigit()
            or (
                tok[0].isupper()
                and low not in _NOT_NAMES
                and not (at_start and not possessive and _sentence_verb(text, low, m.end()))
            )
        )
        adjacent = last_end >= 0 and text[last_end : m.start()].strip(" ") == ""
        if run and not (is_name and adjacent):
            yield " ".join(run)
            run = []
        if not is_name:
            last_end = -2
            continue
        run.append(low)
        last_end = -2 if possessive else m.end()
    if run:
        yield " ".join(run)


def same_name(a: str, b: str) -> bool:
    """One name is the other or a part of it at either end ("ada" ~ "ada moreau", "moreau" ~ "ada moreau")."""
    if a == b:
        return True
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return long.startswith(short + " ") or long.endswith(" " + short)


def namesake(a: str, b: str) -> bool:
    """Two names that share a word yet are not one name: two people ("kwame westleigh" / "kwame northleigh").

    A question naming "Kwame Northleigh" is not about "Kwame Westleigh", though the two
    embed close (the shared first name); ``focus_scores`` ranks such a namesake's
    statements below those of the person asked about.
    """
    return not same_name(a, b) and not set(a.split()).isdisjoint(b.split())


def name_mates(names: Sequence[str | None]) -> list[list[int]]:
    """For each of ``names``, the indices of the others that are the same name (``same_name``), ascending.

    ``same_name`` pair by pair is ``O(n²)`` calls per recall; here each distinct name is
    looked up with its parts at either end (``"ada"``, ``"moreau"`` of ``"ada moreau"``):
    the same answer in ``O(n x words)``. A missing (None or empty) name has no mates.
    """
    out: list[list[int]] = [[] for _ in names]
    for own, group in name_groups(names):
        for i in own:
            out[i] = [j for j in group if j != i]
    return out


def name_groups(names: Sequence[str | None]) -> list[tuple[list[int], list[int]]]:
    """``name_mates`` by distinct name: (the indices holding it, it and its mates' indices, ascending).

    Only names with a mate are listed. The mates of index ``i`` (with name ``own``) are its
    group less ``i``: a recall whose candidates all lead with one name ("the user ...")
    gets one group instead of a list of every other candidate per candidate.
    """
    at: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        if name:
            at.setdefault(name, []).append(i)
    linked: dict[str, set[str]] = {}  # only names with parts (most are one word, or unique)
    for name in at:
        if " " not in name:
            continue
        words = name.split(" ")
        for t in range(1, len(words)):
            for part in (" ".join(words[:t]), " ".join(words[t:])):
                if part in at:
                    linked.setdefault(name, set()).add(part)
                    linked.setdefault(part, set()).add(name)
    out: list[tuple[list[int], list[int]]] = []
    for name, own in at.items():
        others = linked.get(name)
        if len(own) == 1 and not others:
            continue
        out.append((own, sorted([*own, *(j for other in others or () for j in at[other])])))
    return out
