"""Time in the recall on the real engine: windows in the question, and same-slot supersession.

Events are dated with ``remember(valid_from=)``; a query's window is resolved against
now (UTC), so each test places its events from the window ``parse_time_window``
understands for the same query: inside, and a day or more outside.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import valkey.asyncio as avalkey
from prometheus_client import CollectorRegistry

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.core.times import to_ms
from betterdb_memory.core.timewindow import parse_time_window
from betterdb_memory.embedders import OnnxEmbedder
from betterdb_memory.errors import ValidationError

pytestmark = pytest.mark.integration

DAY = 86_400_000
HOUR = 3_600_000


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbedder:
    return OnnxEmbedder()


def _window(query: str) -> tuple[int | None, int | None]:
    w = parse_time_window(query)
    assert w is not None and not w.fuzzy, query
    return w.start_ms, w.end_ms


@pytest.mark.parametrize(
    "expression", ["yesterday", "last week", "in May 2023", "since March", "before 2024"]
)
async def test_a_window_in_the_question_ranks_the_events_inside_first(
    make_store: Callable[..., MemoryStore], expression: str
) -> None:
    registry = CollectorRegistry()
    store = make_store(registry=registry)
    query = f"Which dentist appointment did I have {expression}?"
    start, end = _window(query)
    inside = [start + HOUR] if start is not None else [end - 30 * DAY]  # type: ignore[operator]
    if start is not None and end is not None and end - start > 2 * HOUR:
        inside.append(end - HOUR)
    outside = [] if start is None else [start - DAY, start - 400 * DAY]
    outside += [] if end is None else [end + DAY, end + 200 * DAY]
    ins = [
        await store.remember(f"I had a dentist appointment, number {i}.", valid_from=t)
        for i, t in enumerate(inside)
    ]
    outs = [
        await store.remember(f"I had a dentist appointment, number {10 + i}.", valid_from=t)
        for i, t in enumerate(outside)
    ]
    hits = await store.recall(query, k=len(ins) + len(outs), threshold=2.0, reinforce=False, explain=True)
    # Inside first; the rest after it (a window never empties a recall: issue 26, measured on LoCoMo).
    assert {h.item.id for h in hits[: len(ins)]} == set(ins)
    assert {h.item.id for h in hits[len(ins) :]} == set(outs)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.explain is not None and h.explain.time_window for h in hits)
    assert hits[0].explain is not None and repr(expression) in hits[0].explain.time_window
    value = registry.get_sample_value(
        "agent_memory_time_window_recalls_total", {"store_name": store.name, "mode": "filter"}
    )
    assert value == 1.0


async def test_the_window_finds_what_lies_inside_it_beyond_the_recall_s_own_k(
    make_store: Callable[..., MemoryStore],
) -> None:
    """The recall's own KNN beside a window asks for ``k`` hits only (``main_k``): a memory in
    the window that many nearer memories outside it would push out is brought by the window's
    own query, and the outside ones fill the places after it, read from both replies."""
    store = make_store()
    query = "Which dentist appointment did I have in May 2023?"
    start, end = _window(query)
    assert start is not None and end is not None
    outs = [
        await store.remember(f"I had a dentist appointment, number {i}.", valid_from=start - (i + 2) * DAY)
        for i in range(12)
    ]  # the question's nearest memories, all before May 2023
    inside = await store.remember("Paid the clinic for a filling.", valid_from=start + 3 * DAY)
    hits = await store.recall(query, k=3, threshold=2.0, reinforce=False)
    assert hits[0].item.id == inside and len(hits) == 3
    assert {h.item.id for h in hits[1:]} <= set(outs)
    plain = await store.recall("Which dentist appointment did I have?", k=3, threshold=2.0, reinforce=False)
    assert inside not in {h.item.id for h in plain}  # without the window it is not among the nearest


async def test_a_state_valid_during_the_window_counts(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """A memory with a subject (``state_from``) that began before the window and is current is inside it."""
    store = make_store()
    query = "Where did Ada live in May 2023?"
    start, end = _window(query)
    assert start is not None and end is not None
    home = await store.remember("Ada lives in Lisbon.", valid_from=start - 600 * DAY)
    # What a write with a subject adds (the subjects branch writes it): state_from = valid_from.
    await client.hset(store.keys.doc(home), "state_from", str(start - 600 * DAY))
    trip = await store.remember("Ada visited Porto for a conference.", valid_from=start + DAY)
    old_event = await store.remember("Ada visited Lisbon's zoo.", valid_from=start - 600 * DAY)
    later = await store.remember("Ada lives in a new flat.", valid_from=end + DAY)
    await client.hset(store.keys.doc(later), "state_from", str(end + DAY))
    hits = await store.recall(query, k=5, threshold=2.0, reinforce=False)
    assert {h.item.id for h in hits[:2]} == {home, trip}
    assert {h.item.id for h in hits[2:]} == {old_event, later}


async def test_a_query_without_a_time_expression_is_unchanged(make_store: Callable[..., MemoryStore]) -> None:
    """Same hits, scores and order as the composite score alone; no window explained, no window metric."""
    registry = CollectorRegistry()
    store = make_store(registry=registry)
    for i, text in enumerate(
        [
            "Ada likes hiking in the hills.",
            "The dentist is on Main Street.",
            "Sam plays the cello.",
            "Tea at five.",
        ]
    ):
        await store.remember(text, valid_from=1_600_000_000_000 + i * DAY, importance=0.2 * i)
    hits = await store.recall("hiking and the dentist", k=4, threshold=2.0, reinforce=False, explain=True)
    assert len(hits) == 4
    for h in hits:
        assert h.explain is not None and h.explain.time_window is None and h.explain.superseded_by is None
        w = h.explain.weights
        assert h.score == w.similarity * h.explain.similarity + w.recency * h.explain.recency + (
            w.importance * h.explain.importance
        )
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    vector = (await store.embedder.embed(["hiking and the dentist"]))[0]
    by_vector = await store.recall_by_vector(
        vector, k=4, threshold=2.0, reinforce=False, query="hiking and the dentist"
    )
    assert [h.item.id for h in by_vector] == [h.item.id for h in hits]
    assert [h.score for h in by_vector] == pytest.approx([h.score for h in hits], abs=1e-6)
    for mode in ("filter", "boost"):
        value = registry.get_sample_value(
            "agent_memory_time_window_recalls_total", {"store_name": store.name, "mode": mode}
        )
        assert not value


async def test_bad_tz_is_a_validation_error_before_any_io(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    with pytest.raises(ValidationError) as err:
        await store.recall("what did I do yesterday?", tz="Mars/Olympus")
    assert err.value.code == "validation.timezone"
    with pytest.raises(ValidationError):
        await store.recall("no time here", tz="Nowhere/Else")
    assert store.capabilities is None  # nothing was sent: the index was never probed


async def test_tz_moves_the_day(make_store: Callable[..., MemoryStore]) -> None:
    """ "yesterday" in Auckland (UTC+12/13) starts hours before UTC's yesterday."""
    store = make_store()
    query = "What did I eat yesterday?"
    w = parse_time_window(query, tz="Pacific/Auckland")
    assert w is not None and w.start_ms is not None
    near_start = await store.remember("I ate ramen.", valid_from=w.start_ms + HOUR)
    hits = await store.recall(query, tz="Pacific/Auckland", threshold=2.0, reinforce=False)
    assert [h.item.id for h in hits] == [near_start]


async def test_implicit_supersession_puts_the_newer_statement_first(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    store = make_store(embedder=onnx)
    lisbon = await store.remember("Ada lives in Lisbon.", valid_from="2021-09-01", importance=0.9)
    berlin = await store.remember("Ada moved to Berlin in May 2024.", valid_from="2024-05-01", importance=0.9)
    await store.remember(
        "Ada is vegetarian and allergic to peanuts.", valid_from="2020-02-01", importance=0.9
    )
    hits = await store.recall("Where does Ada live?", k=3, threshold=2.0, reinforce=False, explain=True)
    ids = [h.item.id for h in hits]
    assert ids.index(berlin) < ids.index(lisbon)
    assert ids[0] == berlin
    demoted = hits[ids.index(lisbon)]
    assert demoted.explain is not None and demoted.explain.superseded_by == berlin
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_conversation_turns_are_not_superseded(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    """Turns ("Name: ...") are ranked as they are: one speaker's two turns on a topic are not versions."""
    store = make_store(embedder=onnx)
    lisbon = await store.remember("Ada: I live in Lisbon.", valid_from="2021-09-01", importance=0.9)
    berlin = await store.remember(
        "Ada: I moved to Berlin in May 2024.", valid_from="2024-05-01", importance=0.9
    )
    hits = await store.recall("Where does Ada live?", k=2, threshold=2.0, reinforce=False, explain=True)
    assert {h.item.id for h in hits} == {lisbon, berlin}
    assert all(h.explain is not None and h.explain.superseded_by is None for h in hits)


async def test_both_current_statements_are_not_demoted(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    store = make_store(embedder=onnx)
    tea = await store.remember("Ada likes green tea.", valid_from="2019-01-01", importance=0.9)
    coffee = await store.remember("Ada likes strong coffee.", valid_from="2024-01-01", importance=0.1)
    vectors = await onnx.embed(["Ada likes green tea.", "Ada likes strong coffee."])
    a, b = (np.asarray(v) / np.linalg.norm(v) for v in vectors)
    assert float(a @ b) >= 0.45  # close enough for rules 1-2: rule 3 is what keeps them both
    hits = await store.recall(
        "Ada likes green tea", k=2, threshold=2.0, reinforce=False, explain=True, weights={"recency": 0.0}
    )
    assert [h.item.id for h in hits] == [tea, coffee]
    assert all(h.explain is not None and h.explain.superseded_by is None for h in hits)


async def test_a_window_turns_supersession_off(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder, client: avalkey.Valkey
) -> None:
    """A question about another time ("in 2022") is not a question about the present."""
    store = make_store(embedder=onnx)
    lisbon = await store.remember("Ada lives in Lisbon.", valid_from="2021-09-01")
    await client.hset(store.keys.doc(lisbon), "state_from", str(to_ms("2021-09-01")))
    await store.remember("Ada moved to Berlin in May 2024.", valid_from="2024-05-01")
    hits = await store.recall(
        "Where did Ada live in 2022?", k=3, threshold=2.0, reinforce=False, explain=True
    )
    assert hits[0].item.id == lisbon
    assert all(h.explain is not None and h.explain.superseded_by is None for h in hits)


async def test_as_of_is_the_question_s_now(make_store: Callable[..., MemoryStore]) -> None:
    """ "yesterday" with ``as_of`` is the day before it; the as_of filter still holds."""
    store = make_store()
    yesterday = await store.remember("I had a dentist appointment.", valid_from="2023-05-09T10:00:00Z")
    await store.remember("I had a dentist appointment, again.", valid_from="2023-05-02T10:00:00Z")
    await store.remember("I had a dentist appointment, later.", valid_from="2023-05-11T10:00:00Z")
    hits = await store.recall(
        "Which dentist appointment did I have yesterday?",
        as_of="2023-05-10T12:00:00Z",
        threshold=2.0,
        reinforce=False,
        explain=True,
    )
    assert hits[0].item.id == yesterday
    assert hits[0].explain is not None and hits[0].explain.time_window is not None
    assert "2023-05-09T00:00:00.000Z" in hits[0].explain.time_window


async def test_as_of_turns_supersession_off(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder
) -> None:
    """A recall as of a time asks about that time: no statement is ranked below a newer one."""
    store = make_store(embedder=onnx)
    await store.remember("Ada lives in Lisbon.", valid_from="2021-09-01")
    await store.remember("Ada moved to Berlin in May 2024.", valid_from="2024-05-01")
    hits = await store.recall(
        "Where does Ada live?", as_of="2025-01-01", k=2, threshold=2.0, reinforce=False, explain=True
    )
    assert len(hits) == 2
    assert all(h.explain is not None and h.explain.superseded_by is None for h in hits)
    now = await store.recall("Where does Ada live?", k=2, threshold=2.0, reinforce=False, explain=True)
    assert any(h.explain is not None and h.explain.superseded_by is not None for h in now)


async def test_a_drop_in_embed_fn_store_keeps_the_reference_order(
    make_store: Callable[..., MemoryStore],
) -> None:
    """No re-ranker (an ``embed_fn`` store scores as the reference documents): no window, no supersession."""
    hashing = HashingEmbedder()

    async def embed_fn(text: str) -> list[float]:
        return [float(x) for x in (await hashing.embed([text]))[0]]

    store = make_store(embedder=None, embed_fn=embed_fn, dimensions=hashing.dimensions)
    w = parse_time_window("Which dentist appointment did I have yesterday?")
    assert w is not None and w.start_ms is not None
    await store.remember("I had a dentist appointment.", valid_from=w.start_ms + HOUR)
    await store.remember("I had a dentist appointment, again.", valid_from=w.start_ms - 30 * DAY)
    hits = await store.recall(
        "Which dentist appointment did I have yesterday?", k=2, threshold=2.0, reinforce=False, explain=True
    )
    assert len(hits) == 2
    assert all(h.explain is not None and h.explain.time_window is None for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


# Another attribute of the same person ranked first (every statement of a person is near any
# question naming them, and a slot of three versions has three chances to win): same-slot
# supersession re-orders that person's statements by what they say beyond the name, so the
# slot asked about answers, with its newest version (core.supersession.focus_scores).
_STORIES = [
    (
        "Who is Ivan Reyes in a relationship with?",
        [
            ("Ivan Reyes started working for Initech.", "2019-03-01"),
            ("Ivan Reyes's employer is Massive Dynamic.", "2020-06-01"),
            ("Ivan Reyes is employed by Monarch.", "2023-02-01"),
            ("Ivan Reyes and Robin are a couple.", "2017-05-01"),
            ("Ivan Reyes got engaged to Harper.", "2021-09-01"),
        ],
    ),
    (
        "What does Aiko Torley do for a living?",
        [
            ("Aiko Torley married Riley.", "2014-03-01"),
            ("Aiko Torley is dating Jordan.", "2015-06-01"),
            ("Aiko Torley is in a relationship with Alex.", "2022-02-01"),
            ("Aiko Torley's job title is dentist.", "2016-05-01"),
            ("Aiko Torley became a accountant.", "2024-09-01"),
        ],
    ),
]


@pytest.mark.parametrize(("question", "versions"), _STORIES, ids=["partner", "job"])
async def test_the_slot_the_question_asks_about_answers(
    make_store: Callable[..., MemoryStore], onnx: OnnxEmbedder, question: str, versions: list[tuple[str, str]]
) -> None:
    store = make_store(embedder=onnx)
    ids = [await store.remember(text, valid_from=when) for text, when in versions]
    hits = await store.recall(question, k=3, threshold=2.0, reinforce=False, explain=True)
    assert hits[0].item.id == ids[-1]  # the asked slot's newest version
    assert hits[1].item.id == ids[-2] and hits[1].explain is not None
    assert hits[1].explain.superseded_by == ids[-1]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
