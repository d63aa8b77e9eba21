"""Same-slot supersession (core/supersession.py): names, kinds, pairs and the present order.

Vectors here are hand-made in a tiny space so each rule can be switched on and off;
the rule's quality on real embeddings is measured in bench/temporal_eval.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from betterdb_memory.core.names import leading_name, name_runs, names_of
from betterdb_memory.core.slot_model import KindModel, SlotModel, Veto
from betterdb_memory.core.supersession import (
    EXCLUSIVE_KINDS,
    MANY_KINDS,
    Candidate,
    Prototypes,
    SupersessionRule,
    focus_scores,
    kind_pairs,
    learned_pairs,
    near_pairs,
    one_value_pairs,
    present_order,
    prototype_texts,
    rank_superseded,
    same_exclusive_kind,
    same_kind_pairs,
    superseded_pairs,
    vector_needs,
)

# A 4-d space: axis 0 "home", axis 1 "likes", axis 2 "employer", axis 3 noise.
HOME, LIKES, WORK = 0, 1, 2


def _vec(*weights: float) -> np.ndarray:
    v = np.asarray(weights, dtype=np.float32)
    return v / np.linalg.norm(v)


def _protos() -> Prototypes:
    """One prototype per kind: home and employer exclusive, likes many-valued."""
    _texts, kinds = prototype_texts()
    axis = {"home": HOME, "likes": LIKES, "employer": WORK}
    rows = []
    for k in kinds:
        v = np.zeros(4, dtype=np.float32)
        v[axis.get(k, 3)] = 1.0
        if k not in axis:
            v[3], v[HOME] = 1.0, 0.01 * (len(rows) % 7)  # other kinds: off to the side
        rows.append(v)
    return Prototypes.of(np.asarray(rows), kinds)


def _c(cid: str, text: str, vec: np.ndarray, valid_from: int, score: float) -> Candidate:
    return Candidate(cid, text, vec, valid_from, score)


# -- names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Ada lives in Lisbon.", {"ada", "lisbon"}),
        ("Ada Moreau moved to Berlin in May 2024.", {"ada moreau", "berlin"}),
        ("Greta Zeller's car is a Tesla Model 3.", {"greta zeller", "tesla model 3"}),
        ("The user lives in Oslo.", {"<self>", "oslo"}),
        ("I moved to Porto; my flat is small.", {"<self>", "porto"}),
        ("What Ada loves most is chess.", {"ada"}),
        ("Since March she works at Acme.", {"acme"}),
        ("She bought 2 bikes in 2023.", {"2"}),
        ("nothing capitalised here", set()),
    ],
)
def test_names_of(text: str, names: set[str]) -> None:
    assert names_of(text) == frozenset(names)


@pytest.mark.parametrize(
    ("text", "lead"),
    [
        ("Ada Moreau lives in Lisbon.", "ada moreau"),
        ("In 2019 Ada lived in Lisbon.", "ada"),
        ("In May, Ada moved to Berlin.", "ada"),
        ("What Ada loves most is chess.", "ada"),
        ("Ada and Sam are a couple.", "ada"),
        ("Presented the roadmap.", None),
        ("Ahmed moved to Berlin.", "ahmed"),
        ("Fred lives in Oslo.", "fred"),
        ("I moved to Berlin.", "<self>"),
        ("she moved away", None),
    ],
)
def test_leading_name_is_the_subject(text: str, lead: str | None) -> None:
    assert leading_name(text) == lead
    assert name_runs(text)[:1] == ([lead] if lead else [])


@pytest.mark.parametrize(
    ("text", "names"),
    [("Went hiking with Sara.", {"sara"}), ("Had dinner at the Blue Door with Ines.", {"blue door", "ines"})],
)
def test_a_subjectless_line_has_names_but_no_leading_name(text: str, names: set[str]) -> None:
    """A diary line starts with its verb: its first name is a companion or a place, not its subject."""
    assert leading_name(text) is None
    assert names_of(text) == frozenset(names)


def test_same_phone_model_is_not_the_same_person() -> None:
    """Sharing a value's name (a phone model) does not make two people one."""
    a = _c("a", "Julia Oswell carries a Nothing Phone 2.", _vec(1, 0, 0, 0.1), 100, 0.9)
    b = _c("b", "Kofi Osley upgraded to a Nothing Phone 2.", _vec(1, 0, 0, -0.1), 200, 0.8)
    assert superseded_pairs([a, b], _protos()) == []


# -- prototypes ---------------------------------------------------------------------------


def test_prototype_texts_cover_every_kind_in_order() -> None:
    texts, kinds = prototype_texts()
    assert len(texts) == len(kinds)
    assert list(dict.fromkeys(kinds)) == [*EXCLUSIVE_KINDS, *MANY_KINDS]
    assert not set(EXCLUSIVE_KINDS) & set(MANY_KINDS)
    p = _protos()
    assert p.exclusive.tolist() == [k in EXCLUSIVE_KINDS for k in p.kinds]


# -- pairs -----------------------------------------------------------------------------------


def test_update_of_an_exclusive_slot_is_a_pair() -> None:
    old = _c("a", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.1), 100, 0.9)
    new = _c("b", "Ada moved to Berlin.", _vec(1, 0, 0, -0.1), 200, 0.8)
    assert superseded_pairs([old, new], _protos()) == [(0, 1)]
    assert superseded_pairs([new, old], _protos()) == [(1, 0)]


def test_both_current_likes_are_not_a_pair() -> None:
    tea = _c("a", "Ada likes tea.", _vec(0, 1, 0, 0.1), 100, 0.9)
    coffee = _c("b", "Ada likes coffee.", _vec(0, 1, 0, -0.1), 200, 0.8)
    assert superseded_pairs([tea, coffee], _protos()) == []


def test_the_cheap_half_finds_likes_and_the_kinds_drop_them() -> None:
    """Rules 1-2 (``near_pairs``) alone take both-current likes for an update; rule 3 does not."""
    tea = _c("a", "Ada likes tea.", _vec(0, 1, 0, 0.1), 100, 0.9)
    coffee = _c("b", "Ada likes coffee.", _vec(0, 1, 0, -0.1), 200, 0.8)
    old = _c("c", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.1), 50, 0.7)
    new = _c("d", "Ada moved to Berlin.", _vec(1, 0, 0, -0.1), 300, 0.6)
    cands = [tea, coffee, old, new]
    near = near_pairs(cands)
    assert near == [(0, 1), (2, 3)]
    assert same_kind_pairs(cands, near, _protos()) == [(2, 3)]
    assert same_kind_pairs(cands, [], _protos()) == []


def test_two_attributes_of_one_person_are_not_a_pair() -> None:
    home = _c("a", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.3), 100, 0.9)
    work = _c("b", "Ada works at Acme.", _vec(0, 0, 1, 0.3), 200, 0.8)
    assert superseded_pairs([home, work], _protos(), SupersessionRule(min_similarity=0.0)) == []


def test_kinds_that_are_second_best_for_both_still_match() -> None:
    """Top-two agreement: a statement between home and employer pairs with either."""
    mixed = _c("a", "Ada lives and works in Lisbon.", _vec(1, 0, 0.9, 0), 100, 0.9)
    work = _c("b", "Ada works at Acme.", _vec(0.5, 0, 1, 0), 200, 0.8)
    assert superseded_pairs([mixed, work], _protos()) == [(0, 1)]


def _learned() -> SlotModel:
    """A hand-set model in the 4-d space: kinds home, likes, employer (exclusive, many, exclusive)."""
    kinds = KindModel(
        (8.0 * np.eye(4, 3)).astype(np.float32), np.zeros(3, np.float32), np.asarray([1, 0, 1], np.float32)
    )
    return SlotModel(kinds, None, 0.5)


def test_the_learned_model_judges_rule_3() -> None:
    """The model's probability: an update kept, likes and two attributes of one person dropped."""
    tea = _c("a", "Ada likes tea.", _vec(0, 1, 0, 0.1), 100, 0.9)
    coffee = _c("b", "Ada likes coffee.", _vec(0, 1, 0, -0.1), 200, 0.8)
    old = _c("c", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.1), 50, 0.7)
    new = _c("d", "Ada moved to Berlin.", _vec(1, 0, 0, -0.1), 300, 0.6)
    work = _c("e", "Ada works at Acme.", _vec(0.6, 0, 0.8, 0), 400, 0.5)
    cands = [tea, coffee, old, new, work]
    near = near_pairs(cands)
    assert (0, 1) in near and (2, 3) in near and (3, 4) in near
    assert learned_pairs(cands, near, _learned()) == [(2, 3)]
    assert learned_pairs(cands, [], _learned()) == []


def test_the_learned_model_replaces_the_prototypes() -> None:
    """Rule 3 with a model: the model's pairs, whatever the prototypes say; without one, the prototypes'."""
    old = _c("c", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.1), 50, 0.7)
    new = _c("d", "Ada moved to Berlin.", _vec(1, 0, 0, -0.1), 300, 0.6)
    near = near_pairs([old, new])
    assert kind_pairs([old, new], near, _protos()) == [(0, 1)]
    assert kind_pairs([old, new], near, _protos(), _learned()) == [(0, 1)]
    assert superseded_pairs([old, new], _protos(), model=_learned()) == [(0, 1)]
    never = SlotModel(_learned().kinds, Veto.of([0.0] * 12 + [-50.0], 0.5), 0.5)
    assert kind_pairs([old, new], near, _protos(), never) == []
    assert superseded_pairs([old, new], _protos(), model=never) == []
    # A model that calls axis 0 a many-valued kind drops the pair the prototypes call a home,
    # and one that calls axis 1 exclusive keeps the pair the prototypes call likes (not a veto).
    many = KindModel(_learned().kinds.weights, _learned().kinds.bias, np.asarray([0, 0, 1], np.float32))
    assert kind_pairs([old, new], near, _protos(), SlotModel(many, None, 0.5)) == []
    tea = _c("a", "Ada likes tea.", _vec(0, 1, 0, 0.1), 100, 0.9)
    coffee = _c("b", "Ada likes coffee.", _vec(0, 1, 0, -0.1), 200, 0.8)
    likes = near_pairs([tea, coffee])
    assert kind_pairs([tea, coffee], likes, _protos()) == []
    one = KindModel(_learned().kinds.weights, _learned().kinds.bias, np.ones(3, np.float32))
    assert kind_pairs([tea, coffee], likes, _protos(), SlotModel(one, None, 0.5)) == [(0, 1)]


def _pharmacy() -> list[Candidate]:
    """An update of a kind the model never saw, whose profiles fall on a many-valued kind (axis 1),
    next to another attribute of Ada (home) and the same kind of update of Bo."""
    return [
        _c("a", "Ada picks up prescriptions at Boots.", _vec(0, 1, 0, 0.1), 100, 0.9),
        _c("b", "Ada switched pharmacies and uses Pharmly.", _vec(0, 1, 0, -0.1), 200, 0.8),
        _c("c", "Ada lives in Lisbon.", _vec(0.8, 0.6, 0, 0.05), 50, 0.7),
        _c("d", "Bo picks up prescriptions at Boots.", _vec(0, 1, 0, 0.2), 100, 0.6),
        _c("e", "Bo switched pharmacies and uses Pharmly.", _vec(0, 1, 0, -0.2), 200, 0.5),
    ]


def test_a_question_asking_one_value_keeps_the_update_of_an_unseen_kind() -> None:
    """The model drops the pair (its profiles are many-valued); "Which pharmacy ..." asks one value,
    the two are each other's nearest statement of Ada and their profiles overlap: one slot."""
    cands = _pharmacy()
    near = near_pairs(cands)
    assert (0, 1) in near and (3, 4) in near
    model = _learned()
    assert learned_pairs(cands, near, model) == []
    assert one_value_pairs(cands, near, model, "Which pharmacy does Ada use?") == [(0, 1)]
    assert kind_pairs(cands, near, _protos(), model, question="Which pharmacy does Ada use?") == [(0, 1)]


@pytest.mark.parametrize(
    "question",
    [
        "Which pharmacies does Ada use?",  # several values
        "Where does Ada get medicine?",  # says nothing of how many
        "Which pharmacy does Cy use?",  # another entity
    ],
)
def test_only_a_one_value_question_about_the_entity_adds_pairs(question: str) -> None:
    cands = _pharmacy()
    near = near_pairs(cands)
    assert one_value_pairs(cands, near, _learned(), question) == []
    assert kind_pairs(cands, near, _protos(), _learned(), question=question) == []


def test_the_one_value_pair_must_be_mutually_nearest_with_overlapping_profiles() -> None:
    cands = _pharmacy()
    question = "Which pharmacy does Ada use?"
    # A third version closer to the second than the first is: (0, 1) is no longer mutual.
    third = _c("f", "Ada now uses the hospital pharmacy.", _vec(0, 1, 0, -0.12), 300, 0.4)
    pairs = near_pairs([*cands, third])
    kept = one_value_pairs([*cands, third], pairs, _learned(), question)
    assert (0, 1) not in kept and (1, 5) in kept
    # Home and pharmacy of Ada, each other's nearest, but on two kinds: profiles do not overlap.
    two = [cands[2], _c("g", "Ada uses Pharmly for prescriptions.", _vec(0.2, 1, 0, 0), 300, 0.3)]
    near = near_pairs(two)
    assert near == [(0, 1)]
    assert one_value_pairs(two, near, _learned(), question) == []
    assert (
        one_value_pairs(
            cands, near_pairs(cands), _learned(), question, SupersessionRule(min_one_value_overlap=1.01)
        )
        == []
    )


def test_two_people_are_not_a_pair() -> None:
    a = _c("a", "Greta Zeller lives in Lisbon.", _vec(1, 0, 0, 0.1), 100, 0.9)
    b = _c("b", "Greta Ashby lives in Berlin.", _vec(1, 0, 0, -0.1), 200, 0.8)
    assert superseded_pairs([a, b], _protos()) == []


def test_dissimilar_statements_are_not_a_pair() -> None:
    a = _c("a", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.9), 100, 0.9)
    b = _c("b", "Ada moved to Berlin.", _vec(1, 0, 0, -0.9), 200, 0.8)
    assert superseded_pairs([a, b], _protos(), SupersessionRule(min_similarity=0.5)) == []
    assert superseded_pairs([a, b], _protos(), SupersessionRule(min_similarity=-1.0)) == [(0, 1)]


def test_same_date_is_not_a_pair() -> None:
    a = _c("a", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.1), 100, 0.9)
    b = _c("b", "Ada moved to Berlin.", _vec(1, 0, 0, -0.1), 100, 0.8)
    assert superseded_pairs([a, b], _protos()) == []


def test_fewer_than_two_candidates() -> None:
    assert superseded_pairs([], _protos()) == []
    assert present_order([], _protos()) == []
    one = _c("a", "Ada lives in Lisbon.", _vec(1, 0, 0, 0), 1, 0.5)
    assert present_order([one], _protos()) == [0]


# -- the present order -------------------------------------------------------------------------


def test_ada_story_berlin_ranks_first() -> None:
    """The demo's story: Lisbon (older) was more similar to the question; Berlin is current."""
    lisbon = _c("lisbon", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.05), 1_546_300_800_000, 0.981)
    berlin = _c("berlin", "Ada moved to Berlin in May 2024.", _vec(1, 0, 0, -0.2), 1_714_521_600_000, 0.886)
    tea = _c("tea", "Ada likes tea.", _vec(0, 1, 0, 0), 1_600_000_000_000, 0.90)
    order = present_order([lisbon, tea, berlin], _protos())
    assert order == [2, 0, 1]  # Berlin takes Lisbon's place; Lisbon just below it; tea after


def test_rank_superseded_chain_orders_newest_first() -> None:
    # v1 (t=1) best matching, v2 (t=2), v3 (t=3) worst matching; x unrelated in between
    scores = [0.9, 0.7, 0.5, 0.8]
    vf = [1, 2, 3, 5]
    pairs = [(0, 1), (0, 2), (1, 2)]
    assert rank_superseded(scores, vf, pairs) == [2, 1, 0, 3]


def test_rank_superseded_without_pairs_is_by_score() -> None:
    assert rank_superseded([0.2, 0.9, 0.5], [3, 2, 1], []) == [1, 2, 0]


def test_rank_superseded_moves_nothing_else() -> None:
    scores = [0.95, 0.9, 0.6, 0.5]
    vf = [10, 1, 2, 20]
    # only 1 -> 2 is a slot (older 1 at 0.9, newer 2 at 0.6): 2 takes 0.9, 1 goes just below
    assert rank_superseded(scores, vf, [(1, 2)]) == [0, 2, 1, 3]


# -- which slot the question asks about (focus_scores) -------------------------------------------


def _ada_two_slots(question: np.ndarray) -> list[Candidate]:
    """Three employer versions ranked above two home versions; ``question`` is the question's vector."""
    rows = [
        ("w1", "Ada works at Acme.", _vec(0, 0, 1, 0.1), 1, 0.90),
        ("w2", "Ada joined Globex.", _vec(0, 0, 1, 0.12), 2, 0.88),
        ("w3", "Ada's employer is Initech.", _vec(0, 0, 1, 0.08), 3, 0.87),
        ("h1", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.1), 4, 0.86),
        ("h2", "Ada moved to Berlin.", _vec(1, 0, 0, 0.12), 5, 0.80),
        ("b", "Bruno lives in Oslo.", _vec(1, 0, 0, 0.3), 6, 0.95),
    ]
    return [Candidate(c, t, v, vf, s, float(v @ question)) for c, t, v, vf, s in rows]


def test_focus_puts_the_asked_slot_first() -> None:
    """Ada's employer versions outrank her home ones; the question is about her home: Berlin first."""
    where = _vec(0.8, 0, 0.5, 0.2)  # nearer home than work, beyond what all of Ada's share
    cands = _ada_two_slots(where)
    assert [cands[i].id for i in present_order(cands, _protos())][:2] == ["b", "w3"]  # without the question
    order = present_order(cands, _protos(), question="Where does Ada live?")
    assert [cands[i].id for i in order][:3] == ["b", "h2", "h1"]


def test_focus_is_a_permutation_of_the_entity_scores() -> None:
    cands = _ada_two_slots(_vec(0.8, 0, 0.5, 0.2))
    pairs = superseded_pairs(cands, _protos())
    scores = focus_scores(cands, "Where does Ada live?", pairs)
    assert scores[5] == 0.95  # Bruno: not the entity asked about
    assert sorted(scores[:5]) == sorted(c.score for c in cands[:5])
    assert {scores[3], scores[4]} == {0.90, 0.88}  # the home versions take the entity's best scores


@pytest.mark.parametrize(
    "question",
    ["Where does Bruno live?", "where does she live?"],  # another entity, no name at all
)
def test_focus_without_the_entity_in_the_question_changes_nothing(question: str) -> None:
    cands = _ada_two_slots(_vec(0.8, 0, 0.5, 0.2))
    pairs = superseded_pairs(cands, _protos())
    assert focus_scores(cands, question, pairs) == [c.score for c in cands]


def test_focus_needs_a_same_slot_pair_within_the_entity() -> None:
    cands = _ada_two_slots(_vec(0.8, 0, 0.5, 0.2))
    assert focus_scores(cands, "Where does Ada live?", []) == [c.score for c in cands]
    # a candidate without a known similarity stays where it is
    blind = [Candidate(c.id, c.text, c.vector, c.valid_from, c.score) for c in cands]
    assert focus_scores(blind, "Where does Ada live?", [(3, 4)]) == [c.score for c in cands]


def test_a_namesake_ranks_below_the_person_asked_about() -> None:
    """Greta Ashby shares a first name with Greta Zeller: her bank statement embeds closest to the
    question, yet it is not about the person asked; Zeller's statements take the best scores."""
    q = _vec(1, 0, 0.1, 0.2)
    rows = [
        ("a", "Greta Ashby lives in Bath.", _vec(1, 0, 0, 0.3), 9, 0.97),
        ("z1", "Greta Zeller lives in Lisbon.", _vec(1, 0, 0, 0.1), 1, 0.80),
        ("z2", "Greta Zeller moved to Berlin.", _vec(1, 0, 0, 0.12), 2, 0.70),
        ("o", "Bruno lives in Oslo.", _vec(1, 0, 0, 0.2), 3, 0.90),
    ]
    cands = [Candidate(c, t, v, vf, s, float(v @ q)) for c, t, v, vf, s in rows]
    question = "Where does Greta Zeller live?"
    assert vector_needs([c.text for c in cands], [c.valid_from for c in cands], question) == [0, 1, 2]
    pairs = superseded_pairs(cands, _protos())
    assert pairs == [(1, 2)]
    scores = focus_scores(cands, question, pairs)
    assert sorted(scores) == sorted(c.score for c in cands)  # a permutation
    assert scores[3] == 0.90  # Bruno: neither the person nor a namesake, keeps his score
    assert min(scores[1], scores[2]) > scores[0]  # Zeller's two take the two best of the three
    assert [cands[i].id for i in present_order(cands, _protos(), question=question)] == ["z2", "o", "z1", "a"]
    # Asked by first name alone, both Gretas are the entity: nothing is a namesake.
    assert focus_scores(cands, "Where does Greta live?", pairs)[0] == 0.97


# -- rule 3's second way: mutual nearest statements of one entity, an exclusive kind ahead ----------


def _work_protos() -> Prototypes:
    """A 5-d space: home, employer, job (exclusive), likes (many), and noise."""
    kinds = ["home", "employer", "job", "likes"]
    return Prototypes.of(np.eye(5, dtype=np.float32)[:4], kinds)


def test_one_slot_split_between_two_kinds_is_a_pair() -> None:
    """Best kinds employer / job (not in each other's two best), yet each other's nearest statement."""
    joined = _c("a", "Ada joined Acme.", _vec(0, 0.7, 0.5, 0.55, 0.2), 1, 0.9)
    works = _c("b", "Ada works at Initech.", _vec(0, 0.5, 0.7, 0.3, 0.2), 2, 0.8)
    home = _c("c", "Ada lives in Lisbon.", _vec(1, 0, 0, 0, 0.1), 3, 0.7)
    cands = [joined, works, home]
    protos = _work_protos()
    assert near_pairs(cands) == [(0, 1)]
    assert not same_exclusive_kind(protos.kind_scores(np.stack([joined.vector, works.vector])), protos)[0, 1]
    assert same_kind_pairs(cands, [(0, 1)], protos) == [(0, 1)]
    strict = SupersessionRule(min_exclusive_margin=1.0)
    assert same_kind_pairs(cands, [(0, 1)], protos, strict) == []


def test_mutual_nearest_likes_are_not_a_pair() -> None:
    tea = _c("a", "Ada likes tea.", _vec(0, 0.1, 0, 0.9, 0.3), 1, 0.9)
    coffee = _c("b", "Ada loves coffee.", _vec(0, 0, 0.1, 0.85, 0.4), 2, 0.8)
    assert near_pairs([tea, coffee]) == [(0, 1)]
    assert same_kind_pairs([tea, coffee], [(0, 1)], _work_protos()) == []


def test_not_each_other_s_nearest_is_not_a_pair_by_the_second_way() -> None:
    joined = _c("a", "Ada joined Acme.", _vec(0, 0.7, 0.5, 0.55, 0.2), 1, 0.9)
    works = _c("b", "Ada works at Initech.", _vec(0, 0.5, 0.7, 0.3, 0.2), 2, 0.8)
    twin = _c("c", "Ada joined Acme's board.", _vec(0, 0.7, 0.5, 0.55, 0.21), 3, 0.7)  # nearer to a
    assert (0, 1) not in same_kind_pairs([joined, works, twin], [(0, 1)], _work_protos())


# -- which vectors the rule reads (vector_needs): a recall reads only those -------------------------


def test_no_vector_is_needed_without_two_versions_of_a_name() -> None:
    texts = [
        "Ada lives in Lisbon.",
        "Bruno lives in Oslo.",
        "memory 12: the user likes tea",
        "memory 13: tea",
    ]
    assert vector_needs(texts, [1, 2, 3, 4], "Where does Ada live?") == []
    # the same name on the same date: never a pair either
    assert vector_needs(["Ada lives in Lisbon.", "Ada moved to Berlin."], [5, 5], "Ada?") == []


def test_vectors_needed_are_the_name_mates_and_the_names_asked() -> None:
    texts = [
        "Ada Moreau lives in Lisbon.",  # 0: mates 1 (Ada)
        "Ada moved to Berlin.",  # 1
        "Ada Smith is a nurse.",  # 2: "ada" is a part, so a mate of 1 (not of 0)
        "Bruno lives in Oslo.",  # 3: alone, not asked
        "Greta Zeller is a chef.",  # 4: alone, but the question names her
        "Went hiking with Ada.",  # 5: no leading name
    ]
    vf = [1, 2, 3, 4, 5, 6]
    assert vector_needs(texts, vf, "Do Greta Zeller and Ada know each other?") == [0, 1, 2, 4]
    assert vector_needs(texts, vf, None) == [0, 1, 2]


def _story(rng: np.random.Generator, n: int) -> list[Candidate]:
    """``n`` candidates about a few people, vectors near a few kinds, so pairs and focus happen."""
    people = ["Ada", "Ada Moreau", "Ada Smith", "Bruno", "Greta", "I", "memory 7:", "Went out with Ada"]
    verbs = ["lives in Lisbon.", "works at Acme.", "likes tea.", "moved to Berlin.", "joined Globex."]
    out = []
    for i in range(n):
        axis = int(rng.integers(0, 3))
        v = np.zeros(4, dtype=np.float32)
        v[axis] = 1.0
        v += rng.normal(0, 0.4, 4).astype(np.float32)
        text = f"{people[int(rng.integers(0, len(people)))]} {verbs[int(rng.integers(0, len(verbs)))]}"
        q = _vec(1, 0, 0.3, 0.1)
        out.append(
            Candidate(str(i), text, _vec(*v), int(rng.integers(0, 6)), float(rng.random()), float(v @ q))
        )
    return out


@pytest.mark.parametrize("seed", range(25))
def test_the_rule_reads_only_the_vectors_it_needs(seed: int) -> None:
    """Without the vectors ``vector_needs`` leaves out, and on its candidates alone: the same order."""
    rng = np.random.default_rng(seed)
    cands = _story(rng, int(rng.integers(2, 40)))
    question = "Where does Ada live now?"
    full = present_order(cands, _protos(), question=question)
    need = vector_needs([c.text for c in cands], [c.valid_from for c in cands], question)
    blind = [Candidate(c.id, c.text, c.vector if i in need else None, c.valid_from, c.score, c.similarity)
             for i, c in enumerate(cands)]  # fmt: skip
    assert present_order(blind, _protos(), question=question) == full
    if not need:
        assert superseded_pairs(cands, _protos()) == []
        return
    sub = [cands[i] for i in need]
    pairs = [(need[o], need[n]) for o, n in superseded_pairs(sub, _protos())]
    assert pairs == superseded_pairs(cands, _protos())
    scores = [c.score for c in cands]
    for i, score in zip(need, focus_scores(sub, question, superseded_pairs(sub, _protos())), strict=True):
        scores[i] = score
    assert scores == focus_scores(cands, question, superseded_pairs(cands, _protos()))


def test_a_needed_vector_missing_is_an_error() -> None:
    a = _c("a", "Ada lives in Lisbon.", _vec(1, 0, 0, 0.1), 1, 0.9)
    b = Candidate("b", "Ada moved to Berlin.", None, 2, 0.8)
    with pytest.raises(ValueError, match="vector_needs"):
        near_pairs([a, b])


def test_a_name_asked_without_a_mate_still_needs_its_vector() -> None:
    """ "Ada Smith" has no mate among the candidates, but the question names "Ada": focus reads her."""
    q = _vec(1, 0, 0.1, 0.1)
    rows = [
        ("h1", "Ada Moreau lives in Lisbon.", _vec(1, 0, 0, 0.1), 1, 0.80),
        ("h2", "Ada Moreau moved to Berlin.", _vec(1, 0, 0, 0.12), 2, 0.70),
        ("s", "Ada Smith works at Acme.", _vec(0, 0, 1, 0.1), 3, 0.95),
    ]
    cands = [Candidate(c, t, v, vf, s, float(v @ q)) for c, t, v, vf, s in rows]
    need = vector_needs([c.text for c in cands], [c.valid_from for c in cands], "Where does Ada live?")
    assert need == [0, 1, 2]
    full = present_order(cands, _protos(), question="Where does Ada live?")
    assert [cands[i].id for i in full] == ["h2", "h1", "s"]  # focus: the home versions first
    assert [cands[i].id for i in present_order(cands, _protos())] == ["s", "h2", "h1"]
    blind = [*cands[:2], Candidate("s", cands[2].text, None, 3, 0.95, cands[2].similarity)]
    with pytest.raises(ValueError, match="vector_needs"):
        present_order(blind, _protos(), question="Where does Ada live?")


def _old_near_pairs(cands: list[Candidate], min_similarity: float = 0.45) -> list[tuple[int, int]]:
    """``near_pairs`` as it was written pair by pair (the reference for the matrix version)."""
    from betterdb_memory.core.names import name_mates
    from betterdb_memory.core.slot_kinds import normalised, products

    mates = name_mates([leading_name(c.text) for c in cands])
    vf = [c.valid_from for c in cands]
    named = [(i, j) for i, row in enumerate(mates) for j in row if j > i and vf[i] != vf[j]]
    if not named:
        return []
    rows = sorted({x for pair in named for x in pair})
    at = {x: r for r, x in enumerate(rows)}
    vecs = normalised(np.stack([cands[x].vector for x in rows]).astype(np.float32))  # type: ignore[misc]
    sims = products(vecs, vecs)
    return [(a, b) if vf[a] < vf[b] else (b, a) for a, b in named if sims[at[a], at[b]] >= min_similarity]


def _old_vector_needs(texts: list[str], valid_from: list[int], question: str) -> list[int]:
    """``vector_needs`` pair by pair: name mates, and the leads the question names or a namesake of them."""
    from betterdb_memory.core.names import name_mates, namesake, same_name

    leads = [leading_name(t) for t in texts]
    mates = name_mates(leads)
    if not any(valid_from[j] != valid_from[i] for i, row in enumerate(mates) for j in row):
        return []
    names = names_of(question)
    return [
        i
        for i, row in enumerate(mates)
        if row or (leads[i] and any(same_name(leads[i], n) or namesake(leads[i], n) for n in names))
    ]


@pytest.mark.parametrize("seed", range(40))
def test_near_pairs_and_vector_needs_equal_the_pair_by_pair_rule(seed: int) -> None:
    """The matrix form of rule 1-2 lists the same pairs in the same order; the same vectors are needed."""
    rng = np.random.default_rng(seed)
    people = ["Ada Moreau", "Ada", "Moreau", "Greta Zeller", "Greta Ashby", "I", "Tom"]
    verbs = ["lives in Lisbon.", "moved to Berlin.", "works at Acme.", "likes tea."]
    centre = rng.standard_normal(8)
    cands = []
    for i in range(int(rng.integers(0, 45))):
        text = f"{people[int(rng.integers(0, len(people)))]} {verbs[int(rng.integers(0, len(verbs)))]}"
        vec = centre + rng.standard_normal(8) * float(rng.choice([0.3, 1.0, 3.0]))
        vec = (vec / np.linalg.norm(vec)).astype(np.float32)
        cands.append(Candidate(f"m{i}", text, vec, int(rng.integers(0, 4)), float(rng.random()), 0.5))
    assert near_pairs(cands) == _old_near_pairs(cands)
    texts, vf = [c.text for c in cands], [c.valid_from for c in cands]
    for question in ("Where does Ada live?", "What about Tom?", "Where do I live?", "Is Greta Ashby here?"):
        assert vector_needs(texts, vf, question) == _old_vector_needs(texts, vf, question)
