"""How many values a question asks for (core/slot_question.py), and the plural veto of supersession."""

from __future__ import annotations

import numpy as np
import pytest

from betterdb_memory.core.slot_kinds import Prototypes
from betterdb_memory.core.slot_question import asked_number
from betterdb_memory.core.supersession import Candidate, kind_pairs, near_pairs, plural_veto, prototype_texts


@pytest.mark.parametrize(
    ("question", "number"),
    [
        ("Which bank does Ada use?", "one"),
        ("Who is Ada's dentist?", "one"),
        ("Who is Ada's personal trainer?", "one"),
        ("What is Ada's job now?", "one"),
        ("Which city is Ada in?", "one"),
        ("What car does Ada drive?", "one"),
        ("Which board games does Ada play?", "many"),
        ("What languages does Ada speak?", "many"),
        ("Which countries has Ada been to?", "many"),
        ("What children does Ada have?", "many"),
        ("Who are Ada's friends?", "many"),
        ("Which class does Ada take?", "one"),  # -ss is not a plural
        ("What does Ada like?", None),
        ("Who does Ada's taxes?", "one"),  # "does" is the verb: who does them for her
        ("Who does Ada Lovelace's taxes now?", "one"),
        ("Who does Ada's sister like?", None),  # "does" is the auxiliary: the sister likes
        ("Who trains Ada?", "one"),  # "who" is the subject: who holds the role toward her
        ("Who pays Ada's salary?", "one"),
        ("Who does Ada bank with?", None),  # Ada is the subject: several may answer
        ("Who is Ada close to?", None),
        ("Who kisses?", None),  # nobody named after the verb: too short to read
        ("Who lives with Ada?", None),  # a preposition: Ada is not the verb's object
        ("Who works for Ada Lovelace?", None),
        ("Who looks after Ada's feet?", "one"),  # a particle, not a preposition
        ("Which firm employs Ada?", "one"),  # the noun is the verb's subject; they agree
        ("Which firms employ Ada Lovelace?", "many"),
        ("Which firm employ Ada?", None),  # no agreement: nothing is read
        ("What company employs Ada now?", "one"),
        ("What happened to Ada?", None),  # a preposition before the name, not a verb
        ("In which city is Ada based?", "one"),  # the leading preposition is dropped
        ("With which banks does Ada save?", "many"),
        ("How much does Ada pay for rent?", "one"),  # an amount
        ("How many languages does Ada speak?", None),  # a count may be of many values
        ("What's Ada's phone?", "one"),
        ("Where does Ada live?", None),
        ("How does Ada get to work?", None),
        ("", None),
    ],
)
def test_asked_number(question: str, number: str | None) -> None:
    assert asked_number(question) == number


def _v(*w: float) -> np.ndarray:
    v = np.asarray(w, dtype=np.float32)
    return v / np.linalg.norm(v)


def _cands() -> list[Candidate]:
    return [
        Candidate("a", "Ada holds a degree in physics.", _v(1, 0, 0, 0.1), 100, 0.9),
        Candidate("b", "Ada holds a degree in law.", _v(1, 0, 0, -0.1), 200, 0.8),
        Candidate("c", "Bo holds a degree in maths.", _v(1, 0, 0, 0.2), 100, 0.7),
        Candidate("d", "Bo holds a degree in art.", _v(1, 0, 0, -0.2), 200, 0.6),
    ]


def test_a_plural_question_drops_the_pairs_of_the_entity_it_names() -> None:
    cands = _cands()
    pairs = near_pairs(cands)
    assert (0, 1) in pairs and (2, 3) in pairs
    assert plural_veto(cands, pairs, "Which degrees does Ada hold?") == [p for p in pairs if p != (0, 1)]


@pytest.mark.parametrize(
    "question", ["Which degree does Ada hold?", "What does Ada study?", "Which degrees do people hold?"]
)
def test_a_singular_or_silent_question_or_another_entity_keeps_the_pairs(question: str) -> None:
    cands = _cands()
    pairs = near_pairs(cands)
    assert plural_veto(cands, pairs, question) == pairs


def test_kind_pairs_applies_the_veto_before_either_judge() -> None:
    """The prototypes' judge (any embedder) and the model's both see the vetoed pairs only."""
    texts, kinds = prototype_texts()
    protos = Prototypes.of(np.tile(_v(1, 0, 0, 0), (len(texts), 1)), kinds)
    cands = _cands()[:2]
    pairs = near_pairs(cands)
    assert kind_pairs(cands, pairs, protos, question="Which degrees does Ada hold?") == []
    assert kind_pairs(cands, pairs, protos) == [(0, 1)]
    assert kind_pairs(cands, pairs, protos, question="Which degree does Ada hold?") == [(0, 1)]
