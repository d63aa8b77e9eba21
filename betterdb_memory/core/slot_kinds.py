"""The kinds of attribute same-slot supersession knows, and their prototype sentences.

Rule 3 of ``core.supersession`` asks whether two statements say the same *exclusive*
kind of attribute (a home, an employer: one value at a time) rather than a many-valued
one (things liked, languages: a new value adds to the old). It answers by similarity to
short prototype sentences of each kind, embedded once with the store's own embedder (no
LLM, no I/O here). A kind missing from these tables is unknown: its statements are never
superseded (the rule fails safe), so the tables are the rule's vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["EXCLUSIVE_KINDS", "MANY_KINDS", "Prototypes", "normalised", "products", "prototype_texts"]

FloatArray = npt.NDArray[np.float32]

# Kinds of attribute that hold one value at a time: a new statement replaces the old.
# A few short sentences each, in no particular wording (they are compared by meaning).
EXCLUSIVE_KINDS: dict[str, tuple[str, ...]] = {
    "home": (
        "She lives in that city now.",
        "He moved to another city.",
        "Their home is in a different town now.",
        "I live in this city.",
    ),
    "employer": (
        "He works for that company.",
        "She joined a new employer.",
        "Her employer is a big firm.",
        "He is employed by a bank.",
    ),
    "job": (
        "His job title is manager.",
        "She works as an engineer.",
        "He became a doctor.",
        "Her occupation is teacher.",
        "Her profession changed: she is a nurse now.",
    ),
    "partner": (
        "She is married to him.",
        "He is dating someone new.",
        "Her partner is Sam.",
        "They got engaged.",
    ),
    "car": (
        "He drives that car.",
        "She bought a new car.",
        "His car is a sedan.",
    ),
    "phone": (
        "His phone is that model.",
        "She switched to a new smartphone.",
        "He got a new mobile phone.",
    ),
    "hobby": (
        "His favourite hobby is this.",
        "Her main pastime is that.",
        "What she loves doing most in her free time.",
    ),
    "school": (
        "She studies at that university.",
        "He enrolled at a new school.",
        "She attends college there.",
    ),
    "bank": ("Her bank is that one.", "He switched his bank account to another bank."),
    "doctor": ("She is registered with that GP practice.", "His family physician changed."),
    "team": ("He supports that football club.", "Her favourite team is that one."),
    "gym": ("She goes to that gym.", "He is a member of a fitness club."),
    "diet": ("She is vegetarian now.", "He follows a vegan diet."),
    "age": ("He is 34 years old.", "She turned forty."),
    "salary": ("Her salary is 50,000.", "He earns more now."),
    "contact": ("His email address is this.", "Her phone number changed."),
}
# Kinds that hold many values at once: a new statement adds to the old ones.
MANY_KINDS: dict[str, tuple[str, ...]] = {
    "likes": (
        "She likes this.",
        "He enjoys that a lot.",
        "She loves eating that food.",
        "He is fond of music.",
        "She is a fan of that band.",
    ),
    "languages": (
        "She speaks that language.",
        "He is fluent in another language.",
        "She learned a new language.",
        "He is studying a foreign language.",
    ),
    "pets": ("She has a pet.", "He adopted an animal.", "She keeps a dog at home."),
    "instruments": ("She plays a musical instrument.", "He is learning to play an instrument."),
    "friends": (
        "She is friends with Sam.",
        "He often meets a friend for lunch.",
        "She keeps in touch with an old friend.",
    ),
    "travel": (
        "She has been to that country.",
        "He travelled abroad on holiday.",
        "She visited that place once.",
    ),
    "sports": ("She plays a sport.", "He does that sport at weekends.", "She is on a sports team."),
    "cooking": ("She can cook that dish.", "He often makes that meal."),
    "media": ("She read that book.", "He watched a film."),
    "health": ("She is allergic to that.", "He has a medical condition."),
    "collections": ("He collects old coins.",),
    "skills": ("She knows how to code.", "He can cook well."),
}


def prototype_texts() -> tuple[list[str], list[str]]:
    """``(texts, kinds)``: every prototype sentence and its kind, exclusive kinds first.

    The store embeds ``texts`` once with its embedder and builds ``Prototypes.of``.
    """
    texts: list[str] = []
    kinds: list[str] = []
    for table in (EXCLUSIVE_KINDS, MANY_KINDS):
        for kind, sentences in table.items():
            texts += sentences
            kinds += [kind] * len(sentences)
    return texts, kinds


@dataclass(frozen=True, slots=True)
class Prototypes:
    """The prototype sentences' vectors grouped by kind, embedded once with the store's embedder."""

    vectors: FloatArray  # (p, d), rows L2-normalised, grouped by kind
    starts: npt.NDArray[np.int64]  # first row of each kind (for one ``maximum.reduceat``)
    kinds: tuple[str, ...]
    exclusive: npt.NDArray[np.bool_]  # (len(kinds),)

    @classmethod
    def of(cls, vectors: Sequence[Sequence[float]] | FloatArray, kinds: Sequence[str]) -> Prototypes:
        """From ``prototype_texts()``'s kinds and the vectors of its texts (same order)."""
        names = tuple(dict.fromkeys(kinds))
        index = {k: i for i, k in enumerate(names)}
        rows = np.asarray([index[k] for k in kinds], dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        return cls(
            normalised(np.asarray(vectors, dtype=np.float32)[order]),
            np.searchsorted(rows[order], np.arange(len(names))).astype(np.int64),
            names,
            np.asarray([k in EXCLUSIVE_KINDS for k in names], dtype=np.bool_),
        )

    def kind_scores(self, vectors: FloatArray) -> FloatArray:
        """Per row of ``vectors``, its best cosine with each kind's prototypes: (n, kinds)."""
        sims = products(normalised(vectors), self.vectors)
        out: FloatArray = np.maximum.reduceat(sims, self.starts, axis=1)
        return out


# Rows per matrix product: OpenBLAS goes multi-threaded above a size, and on a busy host
# its threads wait for a core: a 50 x 384 by 384 x 57 product measured 20 ms in one
# call and 0.03 ms in blocks of 16 rows (2 cores shared by many processes).
_BLOCK = 16


def products(a: FloatArray, b: FloatArray) -> FloatArray:
    """``a @ b.T`` in blocks of ``_BLOCK`` rows (the same numbers; see ``_BLOCK``)."""
    if len(a) <= _BLOCK:
        small: FloatArray = a @ b.T
        return small
    out: FloatArray = np.concatenate([a[i : i + _BLOCK] @ b.T for i in range(0, len(a), _BLOCK)])
    return out


def normalised(m: FloatArray) -> FloatArray:
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    out: FloatArray = (m / np.where(norms == 0, 1.0, norms)).astype(np.float32)
    return out
