"""A window in the question reaches superseded versions: "where did Ada live in 2022?" after she moved.

A subject's past version (``remember(subject=)`` then a newer one) lives in the history
index; a question with an exact window asks that index in the recall's round trip for
the versions valid at some instant of the window (``core.time_recall.history_clause``),
ranked first with the window's events and states, under the recall's scope and filters.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from betterdb_memory import MemoryStore
from betterdb_memory.core.times import to_ms

pytestmark = pytest.mark.integration

QUESTION = "Where did Ada live in 2022?"
Y2015, Y2020, Y2024 = to_ms("2015-03-01"), to_ms("2020-03-01"), to_ms("2024-05-01")


async def _ada(store: MemoryStore, thread: str = "ada", **options: object) -> tuple[str, str, str]:
    """Porto (2015-2020), Lisbon (2020-2024), Berlin (since 2024): one subject, two past versions."""
    porto = await store.remember(
        "Ada lives in Porto.", thread_id=thread, subject="home city", valid_from=Y2015, **options
    )
    lisbon = await store.remember(
        "Ada lives in Lisbon.", thread_id=thread, subject="home city", valid_from=Y2020, **options
    )
    berlin = await store.remember(
        "Ada moved to Berlin.", thread_id=thread, subject="home city", valid_from=Y2024, **options
    )
    return porto, lisbon, berlin


async def test_the_version_valid_in_the_window_comes_first(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    porto, lisbon, berlin = await _ada(store)
    hits = await store.recall(QUESTION, thread_id="ada", k=3, threshold=2.0, explain=True)
    assert hits[0].item.id == lisbon
    assert hits[0].item.valid_from == Y2020 and hits[0].item.valid_until == Y2024
    assert hits[0].item.content == "Ada lives in Lisbon."  # read whole from its history document
    assert hits[0].explain is not None and hits[0].explain.time_window is not None
    assert {h.item.id for h in hits[1:]} <= {berlin, porto}  # Porto ended before 2022: not inside
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # The recall reinforced its hits (sync): a past version is never touched, nor brought back.
    assert await store.count(thread_id="ada") == 1
    item = await store.get(lisbon)
    assert item is not None and item.valid_until == Y2024 and item.access_count == 0


async def test_without_a_window_past_versions_stay_out(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    _, _, berlin = await _ada(store)
    hits = await store.recall("Where does Ada live?", thread_id="ada", k=3, threshold=2.0, reinforce=False)
    assert [h.item.id for h in hits] == [berlin]


async def test_the_history_query_keeps_the_recall_s_scope(make_store: Callable[..., MemoryStore]) -> None:
    """Another thread's past versions stay out; a thread id with query syntax in it is escaped."""
    store = make_store()
    thread = 'ada {x}|-@y:[1 2] "z"'
    _, lisbon, berlin = await _ada(store, thread=thread)
    other = await _ada(store, thread="bob")
    hits = await store.recall(QUESTION, thread_id=thread, k=5, threshold=2.0, reinforce=False)
    assert hits[0].item.id == lisbon
    assert not {h.item.id for h in hits} & set(other)
    assert berlin in {h.item.id for h in hits}
    unscoped = await store.recall(QUESTION, k=10, threshold=2.0, reinforce=False)
    assert {h.item.id for h in unscoped[:2]} == {lisbon, other[1]}  # both Lisbons were valid in 2022


async def test_the_history_query_keeps_the_recall_s_where_and_tags(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store()
    _, lisbon, _ = await _ada(store, importance=0.9, tags=["home"])
    office = await store.remember(
        "Ada works in Madrid.", thread_id="ada", subject="office city", valid_from=Y2020, importance=0.2
    )
    await store.remember("Ada works in Paris.", thread_id="ada", subject="office city", valid_from=Y2024)
    where = {"importance": {"$gte": 0.5}}
    hits = await store.recall(QUESTION, where=where, k=5, threshold=2.0, reinforce=False)
    assert hits[0].item.id == lisbon and office not in {h.item.id for h in hits}
    tagged = await store.recall(QUESTION, tags=["home"], k=5, threshold=2.0, reinforce=False)
    assert tagged[0].item.id == lisbon and office not in {h.item.id for h in tagged}
    both = await store.recall(QUESTION, k=5, threshold=2.0, reinforce=False)
    assert {h.item.id for h in both[:2]} == {lisbon, office}  # without the filter: both valid in 2022


async def test_a_where_on_a_declared_field_leaves_the_history_out(
    make_store: Callable[..., MemoryStore],
) -> None:
    """The history index holds no declared field: the window still ranks the current memories, no error."""
    store = make_store(metadata_fields={"priority": "numeric"})
    await _ada(store, metadata={"priority": 1})
    trip = await store.remember(
        "Ada visited Lisbon.", thread_id="ada", valid_from=to_ms("2022-06-01"), metadata={"priority": 1}
    )
    hits = await store.recall(QUESTION, where={"priority": 1}, k=5, threshold=2.0, reinforce=False)
    assert hits[0].item.id == trip
    assert all(h.item.valid_until is None for h in hits)


async def test_with_as_of_the_version_valid_then_and_in_the_window(
    make_store: Callable[..., MemoryStore],
) -> None:
    """``as_of`` already asks the history index: a version valid then that overlaps the window is inside."""
    store = make_store()
    _, lisbon, _ = await _ada(store)
    hits = await store.recall(QUESTION, as_of="2023-06-01", k=3, threshold=2.0, reinforce=False)
    assert [h.item.id for h in hits] == [lisbon]
