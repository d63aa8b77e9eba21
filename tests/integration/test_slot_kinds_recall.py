"""Same-slot supersession's vocabulary through ``recall`` on the real engine (core/slot_kinds.py).

Statements written without a subject, dated by ``valid_from``: a kind of attribute the
vocabulary knows as exclusive (a bank) ranks its newest statement first for a question
about the present; a many-valued one (sports) keeps both statements current.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from betterdb_memory import MemoryHit, MemoryStore
from betterdb_memory.embedders import OnnxEmbedder

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder()


async def _person(store: MemoryStore) -> dict[str, str]:
    """One person's statements over the years: a bank changed four times, a football club, two sports."""
    texts = {
        "monzo": ("Maya Varga moved their account to Monzo.", "2013-05-13"),
        "chase": ("Maya Varga moved their account to Chase.", "2014-04-29"),
        "pollen": ("Maya Varga reacts badly to pollen.", "2015-02-19"),
        "dumplings": ("Maya Varga often cooks dumplings.", "2017-12-24"),
        "porto": ("Maya Varga supports Porto.", "2018-05-22"),
        "tennis": ("Maya Varga plays tennis.", "2018-06-01"),
        "n26": ("Maya Varga's bank is N26.", "2019-10-01"),
        "barclays": ("Maya Varga banks with Barclays.", "2020-04-20"),
        "hsbc": ("Maya Varga moved their account to HSBC.", "2020-06-16"),
        "arsenal": ("Maya Varga supports Arsenal.", "2021-01-24"),
        "cycling": ("Maya Varga does cycling on Sundays.", "2023-05-01"),
    }
    return {key: await store.remember(text, valid_from=when) for key, (text, when) in texts.items()}


async def test_the_newest_statement_of_an_exclusive_kind_ranks_first(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    store = make_store(embedder=onnx)
    ids = await _person(store)
    hits = await store.recall(
        "Which bank does Maya Varga use?", k=3, threshold=2.0, reinforce=False, explain=True
    )
    assert hits[0].item.id == ids["hsbc"]
    older = {h.item.id: h for h in hits if h.item.id in (ids["barclays"], ids["n26"])}
    assert older and all(
        h.explain is not None and h.explain.superseded_by is not None for h in older.values()
    )
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_implicit_updates_off_keeps_the_composite_order(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    """``MemoryStore(implicit_updates=False)``: the same person and question as above, ranked by
    the composite score alone (no hit shown superseded, the order not the rule's)."""
    question = "Which bank does Maya Varga use?"
    on = make_store(embedder=onnx)
    await _person(on)
    ruled = await on.recall(question, k=5, threshold=2.0, reinforce=False, explain=True)
    off = make_store(embedder=onnx, name=f"{on.name}_off", implicit_updates=False)
    ids = await _person(off)
    plain = await off.recall(question, k=5, threshold=2.0, reinforce=False, explain=True)
    assert all(h.explain is not None and h.explain.superseded_by is None for h in plain)
    assert [h.score for h in plain] == sorted((h.score for h in plain), reverse=True)
    assert plain[0].item.id != ids["hsbc"]  # the rule is what puts the newest bank first
    assert any(h.explain is not None and h.explain.superseded_by for h in ruled)


async def test_a_many_valued_kind_keeps_both_statements_current(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    store = make_store(embedder=onnx)
    ids = await _person(store)
    hits = await store.recall(
        "Which sports does Maya Varga do?", k=6, threshold=2.0, reinforce=False, explain=True
    )
    by_id = {h.item.id: h for h in hits}
    assert {ids["tennis"], ids["cycling"]} <= set(by_id)
    for key in ("tennis", "cycling"):
        explain = by_id[ids[key]].explain
        assert explain is not None and explain.superseded_by is None


@pytest.mark.parametrize(
    ("older", "newer", "question"),
    [
        (
            "Lena Hart holds a degree in physics.",
            "Lena Hart holds a degree in law.",
            "Which degrees does Lena Hart hold?",
        ),
        (
            "Lena Hart has shares in Tesla.",
            "Lena Hart has shares in Nvidia.",
            "Which companies does Lena Hart have shares in?",
        ),
    ],
)
async def test_a_question_asking_for_several_values_supersedes_nothing(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder, older: str, newer: str, question: str
) -> None:
    """Two both-current statements the kind model takes for one slot (kinds it was not fitted on):
    a question whose asked noun is plural keeps both current (core.slot_question)."""
    store = make_store(embedder=onnx)
    old_id = await store.remember(older, valid_from="2016-03-01")
    new_id = await store.remember(newer, valid_from="2021-09-01")
    hits = await store.recall(question, k=5, threshold=2.0, reinforce=False, explain=True)
    by_id = {h.item.id: h for h in hits}
    assert {old_id, new_id} <= set(by_id)
    explain = by_id[old_id].explain
    assert explain is not None and explain.superseded_by is None


@pytest.mark.parametrize(
    ("older", "newer", "question"),
    [
        (
            "Lena Hart's piano is tuned by Mr Abbot.",
            "Lena Hart found a new piano tuner, Ms Quill.",
            "Who is Lena Hart's piano tuner?",
        ),
    ],
)
async def test_a_question_asking_one_value_ranks_the_newest_of_an_unseen_kind_first(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder, older: str, newer: str, question: str
) -> None:
    """Kinds the kind model was never fitted on: the question's singular noun says one value
    (core.supersession.one_value_pairs), so the newer statement ranks first and the older is
    marked superseded; another attribute of Lena stays current."""
    store = make_store(embedder=onnx)
    old_id = await store.remember(older, valid_from="2016-03-01")
    other_id = await store.remember("Lena Hart lives in Ghent.", valid_from="2018-05-01")
    new_id = await store.remember(newer, valid_from="2021-09-01")
    hits = await store.recall(question, k=5, threshold=2.0, reinforce=False, explain=True)
    by_id = {h.item.id: h for h in hits}
    assert hits[0].item.id == new_id
    explain = by_id[old_id].explain
    assert explain is not None and explain.superseded_by == new_id
    other = by_id[other_id].explain
    assert other is not None and other.superseded_by is None


#: Ines's cat sitter twice worded alike, then worded apart (the current one), among her other
#: statements; shared with the cluster's test (tests/cluster/test_cluster_supersession_vectors.py).
CAT_SITTER = [
    ("Ines Moll's cat sitter is Pia.", "2014-03-01"),
    ("Ines Moll plays the cello.", "2015-03-01"),
    ("Ines Moll's cat sitter is Rosa.", "2017-03-01"),
    ("Ines Moll works at a bakery.", "2018-03-01"),
    ("Ines Moll pays Jonas to feed the cat while she travels.", "2023-03-01"),
    ("Ines Moll lives in Graz.", "2023-06-01"),
]
CAT_SITTER_QUESTION = "Who is Ines Moll's cat sitter?"


def assert_versions(
    hits: Sequence[MemoryHit], newest: str, older: Sequence[str], others: Sequence[str] = ()
) -> None:
    """``newest`` ranks first, each of ``older`` is shown superseded, each of ``others`` is not."""
    by_id = {h.item.id: h for h in hits}
    assert hits[0].item.id == newest
    for key in older:
        explain = by_id[key].explain
        assert explain is not None and explain.superseded_by is not None
    for key in others:
        explain = by_id[key].explain
        assert explain is not None and explain.superseded_by is None


async def test_a_one_value_question_finds_a_version_worded_apart(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    """Two versions worded alike and the current one worded apart (not the nearest statement of
    either): the question's slot (core.slot_members) still holds it, so it ranks first."""
    store = make_store(embedder=onnx)
    ids = [await store.remember(text, valid_from=when) for text, when in CAT_SITTER]
    hits = await store.recall(CAT_SITTER_QUESTION, k=6, threshold=2.0, reinforce=False, explain=True)
    assert_versions(hits, ids[4], (ids[0], ids[2]), (ids[1], ids[3], ids[5]))


async def test_a_namesake_does_not_answer_for_the_person_asked(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    """Kwame Westleigh's doctor embeds nearest to a question about Kwame Northleigh (the shared
    first name); the answer is Northleigh's newest doctor (core.slot_focus)."""
    store = make_store(embedder=onnx)
    texts = [
        ("Kwame Westleigh sees Dr Rinaldi.", "2021-03-01"),
        ("Kwame Westleigh lives in Leeds.", "2016-03-01"),
        ("Kwame Northleigh is registered with Dr Osei.", "2015-03-01"),
        ("Kwame Northleigh lives in York.", "2016-05-01"),
        ("Kwame Northleigh plays chess.", "2017-05-01"),
        ("Kwame Northleigh's GP is now Dr Holt.", "2019-03-01"),
    ]
    ids = [await store.remember(text, valid_from=when) for text, when in texts]
    hits = await store.recall("Which doctor does Kwame Northleigh see?", k=3, threshold=2.0, reinforce=False)
    assert hits[0].item.id == ids[5]
    assert ids[0] not in [h.item.id for h in hits[:2]]


#: Three versions of a role someone holds toward Otto (worded apart), for a question with no asked
#: noun; ``role_story`` dates them among two other statements of his. Shared with the cluster's test.
ROLE_STORIES = [
    (
        [
            "Otto Brandt's windows are cleaned by Clearview.",
            "Otto Brandt pays a lad called Robbie to do the windows.",
            "Otto Brandt has Brightpane round monthly for the windows.",
        ],
        "Who cleans Otto Brandt's windows?",
    ),
    (
        [
            "Otto Brandt's accounts are done by Petra.",
            "Otto Brandt hired Kluge & Co to file the tax return.",
            "Otto Brandt's accounts are done by Frau Weiss now.",
        ],
        "Who does Otto Brandt's accounts?",
    ),
    (
        [
            "Otto Brandt's lawn is mowed by a neighbour, Sven.",
            "Otto Brandt pays GreenCut to look after the grass.",
            "Otto Brandt's lawn is mowed by Jonas these days.",
        ],
        "Who mows Otto Brandt's lawn?",
    ),
]


#: Ten more, written after the rule and never tuned on (bench/results/temporal.md, section J): the
#: rule's first check on roles it was not written with (5 of 10 rank the newest first without it).
LATER_ROLE_STORIES = [
    (
        [
            "Otto Brandt's dog is walked by Paws Plus.",
            "Otto Brandt pays a student called Tom to walk the dog.",
            "Otto Brandt has a walker named Lea take the dog out at noon.",
        ],
        "Who walks Otto Brandt's dog?",
    ),
    (
        [
            "Otto Brandt's hair is cut by Dmitri.",
            "Otto Brandt goes to a salon called Shears for haircuts.",
            "Otto Brandt has his hair done by Ana these days.",
        ],
        "Who cuts Otto Brandt's hair?",
    ),
    (
        [
            "Otto Brandt's car is repaired by Bosch Service.",
            "Otto Brandt takes the car to a mechanic called Rudi.",
            "Otto Brandt's car now goes to Autohaus Klein for repairs.",
        ],
        "Who repairs Otto Brandt's car?",
    ),
    (
        [
            "Otto Brandt's children are minded by a nanny, Greta.",
            "Otto Brandt uses a nursery called Little Oaks for the kids.",
            "Otto Brandt's kids are looked after by his sister Mia now.",
        ],
        "Who looks after Otto Brandt's children?",
    ),
    (
        [
            "Otto Brandt's taxes are prepared by Hofmann Tax.",
            "Otto Brandt pays an adviser called Jens to do the tax return.",
            "Otto Brandt's tax return is done by Steuerbuero Lang.",
        ],
        "Who prepares Otto Brandt's taxes?",
    ),
    (
        [
            "Otto Brandt's piano is tuned by Mr Petrov.",
            "Otto Brandt calls a tuner named Olga for the piano.",
            "Otto Brandt has Klavierhaus Ritter tune the piano now.",
        ],
        "Who tunes Otto Brandt's piano?",
    ),
    (
        [
            "Otto Brandt's post is delivered by Karl.",
            "Otto Brandt's letters are brought by a postwoman, Jana.",
            "Otto Brandt gets his mail from a new postman called Ben.",
        ],
        "Who delivers Otto Brandt's post?",
    ),
    (
        [
            "Otto Brandt's garden is tended by Green Fingers.",
            "Otto Brandt hires a gardener called Piet for the garden.",
            "Otto Brandt's flower beds are kept by Blumen Maier now.",
        ],
        "Who tends Otto Brandt's garden?",
    ),
    (
        [
            "Otto Brandt's teeth are checked by Dr Aziz.",
            "Otto Brandt sees a dentist called Dr Lind for check-ups.",
            "Otto Brandt's dental care is by Smile Clinic now.",
        ],
        "Who checks Otto Brandt's teeth?",
    ),
    (
        [
            "Otto Brandt's cat is fed by his neighbour Rosa when he travels.",
            "Otto Brandt pays a sitter called Kim to feed the cat.",
            "Otto Brandt's cat is fed by a service, PetPal, during trips.",
        ],
        "Who feeds Otto Brandt's cat when he travels?",
    ),
]


def role_story(texts: list[str]) -> list[tuple[str, str]]:
    """The versions at 0, 2 and 4 (oldest first), Otto's other statements at 1 and 3."""
    return [
        (texts[0], "2015-03-01"),
        ("Otto Brandt plays the cello.", "2016-03-01"),
        (texts[1], "2019-03-01"),
        ("Otto Brandt lives in Ulm.", "2020-03-01"),
        (texts[2], "2023-03-01"),
    ]


def _known_miss(story: tuple[list[str], str], reason: str) -> Any:
    return pytest.param(*story, marks=pytest.mark.xfail(strict=True, reason=reason))


#: Where the later stories miss beyond the first place (section J): kept visible, not dropped.
_LATER_STRICT = [
    _known_miss(s, "one older childminder is not taken as a version (it still ranks below the newest)")
    if "children" in s[1]
    else _known_miss(s, "'plays the cello' is shown superseded by the piano tuner (a pair across two slots)")
    if "piano" in s[1]
    else s
    for s in LATER_ROLE_STORIES
]


@pytest.mark.parametrize(("texts", "question"), ROLE_STORIES + _LATER_STRICT)
async def test_a_question_asking_who_holds_a_role_toward_the_person_ranks_the_newest_first(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder, texts: list[str], question: str
) -> None:
    """No asked noun, but "who" is the verb's subject and the person its object: English asks
    that of one (core.slot_question), so the versions of that slot supersede each other; the
    person's other statements stay current."""
    store = make_store(embedder=onnx)
    ids = [await store.remember(text, valid_from=when) for text, when in role_story(texts)]
    hits = await store.recall(question, k=5, threshold=2.0, reinforce=False, explain=True)
    assert_versions(hits, ids[4], (ids[0], ids[2]), (ids[1], ids[3]))


@pytest.mark.parametrize(("texts", "question"), LATER_ROLE_STORIES)
async def test_later_role_stories_rank_the_newest_first(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder, texts: list[str], question: str
) -> None:
    """The first place alone, for every later story (the two known misses above included)."""
    store = make_store(embedder=onnx)
    ids = [await store.remember(text, valid_from=when) for text, when in role_story(texts)]
    hits = await store.recall(question, k=5, threshold=2.0, reinforce=False)
    assert hits[0].item.id == ids[4]


async def test_a_question_where_the_person_is_the_subject_keeps_both_current(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    """ "Who does Otto play chess with?" may have several answers: nothing supersedes."""
    store = make_store(embedder=onnx)
    old_id = await store.remember("Otto Brandt plays chess with Udo.", valid_from="2015-03-01")
    await store.remember("Otto Brandt works at a bank.", valid_from="2020-03-01")
    new_id = await store.remember("Otto Brandt plays chess with Jana at the club.", valid_from="2023-03-01")
    hits = await store.recall(
        "Who does Otto Brandt play chess with?", k=5, threshold=2.0, reinforce=False, explain=True
    )
    by_id = {h.item.id: h for h in hits}
    assert {old_id, new_id} <= set(by_id)
    explain = by_id[old_id].explain
    assert explain is not None and explain.superseded_by is None
