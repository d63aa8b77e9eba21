"""A subject write's crash points, each followed by the next read or write of the subject (issue #26).

Shared by tests/integration/test_subjects_crash.py (embedded engine, valkey-search
standalone) and tests/cluster/test_cluster_subjects_crash.py (the pointer, the versions
and the journal in different slots). Each case writes a subject, kills its writer at one
point (``tests.crash_points``), then opens the store again as another process would
(``make_store()``: a new store on the same name, with the journal's grace set to 0 by
the caller) or keeps using the same one (a lost connection), and checks what
docs/concepts/time.md promises: one current version, its predecessors' ``valid_until``,
``as_of``, ``fact_history``'s order, ``count``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from betterdb_memory import Fact, MemoryStore
from betterdb_memory.core import subject_repair
from betterdb_memory.core.codec import as_text
from betterdb_memory.errors import StoreConnectionError
from tests.crash_points import (
    Crashed,
    cut,
    docs_of,
    end_dates,
    journal_of,
    off_subject,
    pointer_of,
    round_trip_1,
    round_trip_2,
)
from tests.repair_order import holding, orders, write_trip
from tests.round_trips import counting

Y2018 = 1_514_764_800_000
Y2019 = 1_546_300_800_000
Y2020 = 1_577_836_800_000
Y2021 = 1_609_459_200_000
Y2022 = 1_640_995_200_000
Y2023 = 1_672_531_200_000
Y2024 = 1_704_067_200_000
Y2025 = 1_735_689_600_000
ADA = {"thread_id": "ada"}
MakeStore = Callable[..., MemoryStore]
#: Check ``as_of`` through the indexes. Off on the valkey-search cluster: its shards miss
#: some index updates of a script's ``RENAME`` (``RETIRE``) for seconds, crash or not
#: (measured by an earlier session: 10-11 of 12 indexed); ``valid_until`` is checked by key.
INDEX_AS_OF = True


async def crash_writing(
    store: MemoryStore,
    content: str,
    valid_from: int,
    *,
    at: Callable[[Sequence[Any]], bool] = round_trip_1,
    keep: Callable[[Any], bool] = lambda step: True,
) -> str:
    """``remember(content, subject="city")`` whose writer dies at ``at`` (``keep``: what that round trip applied)."""
    with cut(store, at=at, keep=keep) as torn, contextlib.suppress(Crashed):
        await store.remember(content, subject="city", valid_from=valid_from, **ADA)
    assert torn, "the crash point was never reached"
    return str(torn[0][0][1]).rsplit(":", 1)[-1] if at is round_trip_1 else ""


async def ids(store: MemoryStore, as_of: int | None = None) -> set[str]:
    return {m.id for m in (await store.list(as_of=as_of, **ADA)).items}


async def read_first(store: MemoryStore, how: str) -> None:
    """The next read after the crash: the one that must find and repair it."""
    reads: dict[str, Callable[[], Awaitable[Any]]] = {
        "list": lambda: store.list(**ADA),
        "count": lambda: store.count(**ADA),
        "recall": lambda: store.recall("city", threshold=0.0, **ADA),
        "get": lambda: store.get("anything"),
        "as_of": lambda: store.list(as_of=Y2022, **ADA),
        "fact_history": lambda: store.fact_history("city", **ADA),
    }
    await reads[how]()


async def until_of(store: MemoryStore, memory_id: str) -> int | None:
    item = await store.get(memory_id)
    assert item is not None, memory_id
    return item.valid_until


async def counted(store: MemoryStore, t: int) -> int:
    """``count(as_of=t)``, read again for a while when it disagrees with the list: a
    valkey-search cluster's shards index a script's writes late (tests/cluster/test_cluster_as_of.py)."""
    want = len(await ids(store, as_of=t))
    for _ in range(150):
        n = await store.count(as_of=t, **ADA)
        if n == want:
            break
        await asyncio.sleep(0.02)
    return n


async def check(store: MemoryStore, current: str, ends: dict[str, int], probes: dict[int, set[str]]) -> None:
    """One current version; each past one ends where expected; ``as_of`` finds one version per instant."""
    assert await ids(store) == {current}
    assert await store.count(**ADA) == 1
    assert await until_of(store, current) is None
    for mid, end in ends.items():
        assert await until_of(store, mid) == end, mid
    for t, expected in probes.items() if INDEX_AS_OF else ():
        assert await ids(store, as_of=t) == expected, t
        assert await counted(store, t) == len(expected), t
    history = await store.fact_history("city", **ADA)
    assert [(r.id, r.current) for r in history] == [
        (current, True),
        *((mid, False) for mid in sorted(ends, key=lambda m: -(ends[m] or 0))),
    ]


# -- the cases ------------------------------------------------------------------------------


async def reply_lost_after_round_trip_1(make_store: MakeStore, how: str) -> None:
    """The new version's document, its pointer and the journal written; the writer died before round trip 2."""
    writer = make_store()
    lisbon = await writer.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    berlin = await crash_writing(writer, "Berlin", Y2024)
    reader = make_store()
    await read_first(reader, how)
    await check(reader, berlin, {lisbon: Y2024}, {Y2022: {lisbon}, Y2025: {berlin}})


async def a_past_dated_write_crashed(make_store: MakeStore) -> None:
    """Porto (2022) between Lisbon (2019) and Berlin (2024): it was to retire itself and end Lisbon at 2022."""
    writer = make_store()
    lisbon = await writer.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    berlin = await writer.remember("Berlin", subject="city", valid_from=Y2024, **ADA)
    porto = await crash_writing(writer, "Porto", Y2022)
    reader = make_store()
    await read_first(reader, "fact_history")
    await check(
        reader, berlin, {porto: Y2024, lisbon: Y2022}, {Y2020: {lisbon}, Y2023: {porto}, Y2025: {berlin}}
    )


async def a_tie_crashed(make_store: MakeStore) -> None:
    """Two versions of one instant: the later write wins, the earlier is valid at no instant."""
    writer = make_store()
    first = await writer.remember("Lisbon", subject="city", valid_from=Y2022, **ADA)
    second = await crash_writing(writer, "Porto", Y2022)
    reader = make_store()
    await read_first(reader, "as_of")
    await check(reader, second, {first: Y2022}, {Y2022: {second}, Y2024: {second}})


async def a_write_after_a_forgotten_current_crashed(make_store: MakeStore) -> None:
    """No current version (forgotten): the write becomes current and was to end the past one at its start."""
    writer = make_store()
    lisbon = await writer.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    berlin = await writer.remember("Berlin", subject="city", valid_from=Y2024, **ADA)
    assert await writer.forget(berlin)
    porto = await crash_writing(writer, "Porto", Y2022)
    reader = make_store()
    await read_first(reader, "fact_history")
    await check(reader, porto, {lisbon: Y2022}, {Y2020: {lisbon}, Y2023: {porto}})


async def the_pointer_took_a_write_its_document_never_got(make_store: MakeStore) -> None:
    """The pointer's slot took Berlin, the document's did not: Lisbon is current again."""
    writer = make_store()
    lisbon = await writer.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    keep_pointer, keep_journal = pointer_of(writer), journal_of(writer)
    await crash_writing(writer, "Berlin", Y2024, keep=lambda s: keep_pointer(s) or keep_journal(s))
    reader = make_store()
    history = await reader.fact_history("city", **ADA)
    assert [(r.id, r.current) for r in history] == [(lisbon, True)]
    assert await ids(reader) == {lisbon}
    porto = await reader.remember("Porto", subject="city", valid_from=Y2022, **ADA)
    await check(reader, porto, {lisbon: Y2022}, {Y2020: {lisbon}, Y2023: {porto}})


async def the_document_landed_and_its_pointer_never_did(make_store: MakeStore) -> None:
    """Berlin's document and journal entry written, its ``SUBJECT_PUT`` lost: put again by the next read."""
    writer = make_store()
    lisbon = await writer.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    keep_doc, keep_journal = docs_of(writer), journal_of(writer)
    berlin = await crash_writing(writer, "Berlin", Y2024, keep=lambda s: keep_doc(s) or keep_journal(s))
    reader = make_store()
    await read_first(reader, "list")
    await check(reader, berlin, {lisbon: Y2024}, {Y2022: {lisbon}, Y2025: {berlin}})


async def a_lost_connection_before_round_trip_2(make_store: MakeStore) -> None:
    """The same process lives on: its own next read repairs, with no grace to wait."""
    store = make_store()
    lisbon = await store.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    with cut(store, at=round_trip_2, error=StoreConnectionError("cut")) as torn:
        berlin = await store.remember("Berlin", subject="city", valid_from=Y2024, **ADA)
    assert torn
    await check(store, berlin, {lisbon: Y2024}, {Y2022: {lisbon}, Y2025: {berlin}})


async def repairers_and_a_writer_at_once(make_store: MakeStore) -> None:
    """Two readers repair while a third process writes a newer version: one current, every end right."""
    writer = make_store()
    lisbon = await writer.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    berlin = await writer.remember("Berlin", subject="city", valid_from=Y2024, **ADA)
    porto = await crash_writing(writer, "Porto", Y2022)
    one, two, three = make_store(), make_store(), make_store()
    _, _, rome = await asyncio.gather(
        one.list(**ADA),
        two.count(**ADA),
        three.remember("Rome", subject="city", valid_from=Y2025, **ADA),
    )
    await check(
        one,
        rome,
        {berlin: Y2025, porto: Y2024, lisbon: Y2022},
        {Y2020: {lisbon}, Y2023: {porto}, Y2024: {berlin}, Y2025 + 1: {rome}},
    )


SCOPE = {"namespace": "n1", "agent_id": "a1", "thread_id": "t1"}


async def run(store: MemoryStore, facts: Sequence[Fact]) -> list[str]:
    """A fresh source, then one facts run whose extractor returns ``facts``; the facts created."""
    await asyncio.sleep(0.003)  # each source in a later millisecond
    await store.remember(f"source {len(facts)} {id(facts)}", **SCOPE)
    result = await store.consolidate("facts", extract_facts=lambda items: list(facts), **SCOPE)
    return list(result.created)


async def a_retraction_died_before_leaving_its_subject(make_store: MakeStore) -> None:
    """Paris (2023) retracted as of its own start is in history, valid at no instant; the pointer still named it."""
    writer = make_store()
    (paris,) = await run(writer, [Fact("city", "Paris", "2023-01-01")])
    with cut(writer, at=off_subject) as torn, contextlib.suppress(Crashed):
        await run(writer, [Fact("city", "", "2023-01-01", tombstone=True)])
    assert torn
    reader = make_store()
    (record,) = await reader.fact_history("city", kind="fact", **SCOPE)
    assert (record.id, record.current, record.retracted) == (paris, False, True)
    assert record.valid_until == record.valid_from
    # void, it keeps no older-dated fact from being current
    (berlin,) = await run(reader, [Fact("city", "Berlin", "2022-06-01")])
    records = {r.id: r.current for r in await reader.fact_history("city", kind="fact", **SCOPE)}
    assert records == {berlin: True, paris: False}


async def a_correction_crashed_before_its_end_dates(make_store: MakeStore) -> None:
    """Lisbon 2018, Rome 2020, Paris 2023, then "no longer Paris; Berlin since 2021" dies before round trip 2."""
    writer = make_store()
    scope = SCOPE

    (lisbon,) = await run(writer, [Fact("city", "Lisbon", "2018-01-01")])
    (rome,) = await run(writer, [Fact("city", "Rome", "2020-01-01")])
    (paris,) = await run(writer, [Fact("city", "Paris", "2023-01-01")])
    with cut(writer, at=end_dates) as torn, contextlib.suppress(Crashed):
        await run(writer, [Fact("city", "", tombstone=True), Fact("city", "Berlin", "2021-01-01")])
    assert torn
    reader = make_store()
    records = {r.id: r for r in await reader.fact_history("city", kind="fact", **scope)}
    (berlin,) = [mid for mid, r in records.items() if r.current]
    ms = {
        mid: None if r.valid_until is None else int(r.valid_until.timestamp() * 1000)
        for mid, r in records.items()
    }
    assert ms == {berlin: None, paris: Y2023, rome: Y2021, lisbon: Y2020}
    probes = {Y2022: {berlin}, Y2023 + 1: {berlin}, Y2020 + 1: {rome}, Y2019: {lisbon}}
    for t, expected in probes.items() if INDEX_AS_OF else ():
        page = await reader.list(as_of=t, limit=100, **scope)
        assert {m.id for m in page.items if m.kind == "fact"} == expected, datetime.fromtimestamp(
            t / 1000, UTC
        )
    assert {m.id for m in (await reader.list(limit=100, **scope)).items if m.kind == "fact"} == {berlin}


# -- the look beside the read (docs/concepts/time.md, "What a reader sees, and when") ---------


async def the_first_read_answers_repaired(make_store: MakeStore, how: str) -> None:
    """The read that finds the crash answers as repaired: its look went beside it, so it read again."""
    writer = make_store()
    lisbon = await writer.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    berlin = await crash_writing(writer, "Berlin", Y2024)
    reader = make_store()
    if how == "get":  # by key: right on the cluster too, whose shards index RETIRE's RENAME late
        item = await reader.get(lisbon)
        assert item is not None and item.valid_until == Y2024
    elif how == "list":
        assert await ids(reader) == {berlin}
    elif how == "count":
        assert await reader.count(**ADA) == 1
    else:
        hits = await reader.recall_by_vector(await embed(reader, "Berlin"), threshold=0.0, **ADA)
        assert [h.item.id for h in hits] == [berlin], [(h.item.id, h.item.content) for h in hits]
    await check(reader, berlin, {lisbon: Y2024}, {Y2022: {lisbon}, Y2025: {berlin}})


async def embed(store: MemoryStore, text: str) -> list[float]:
    return [float(x) for x in (await store.embedder.embed([text]))[0]]


async def a_look_adds_no_round_trip_after_another(
    make_store: MakeStore, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A read (or a subject write) whose store looks at the journal waits for as many round trips,
    one after another, as the same call when no look is due: the look goes beside it
    (tests/round_trips.py counts)."""
    monkeypatch.setattr(subject_repair, "PROBE_INTERVAL_S", 0.0)  # every read looks
    # The look must find nothing: with no grace it could meet the last write's entry, settled
    # but taken off by the very round trip it goes beside.
    monkeypatch.setattr(subject_repair, "JOURNAL_GRACE_MS", 5_000)
    store = make_store()
    mid = await store.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    vector = await embed(store, "Lisbon")
    reads: dict[str, Callable[[], Awaitable[Any]]] = {
        "get": lambda: store.get(mid),
        "list": lambda: store.list(**ADA),
        "count": lambda: store.count(**ADA),
        "recall_by_vector": lambda: store.recall_by_vector(vector, threshold=0.0, **ADA),
        "remember": lambda: store.remember("Porto", subject="city", valid_from=Y2020, **ADA),
    }
    read = reads[how]
    await read()  # the index known ready, the write's journal entry settled
    with counting(store) as trips:
        await read()
        looked, depth_with_look = trips.looked, trips.depth
        monkeypatch.setattr(subject_repair, "PROBE_INTERVAL_S", 3600.0)
        await read()  # the last look for an hour
        trips.reset()
        await read()
    assert looked and not trips.looked, (looked, trips.calls)
    assert depth_with_look == trips.depth, (depth_with_look, trips.depth)


# -- a write beside the repair (docs/concepts/time.md, "What a reader sees, and when") ----------


async def a_write_beside_the_repair_of_its_subject(make_store: MakeStore, crash: str, order: str) -> None:
    """Berlin (2024) crashed; another process's first call writes Rome (2025) beside the repair
    its look starts. Rome is sent once and returns after the repair, and the subject ends as if
    Rome had been written after it, whichever of the two landed first."""
    writer = make_store()
    lisbon = await writer.remember("Lisbon", subject="city", valid_from=Y2019, **ADA)
    docs, pointer, journal = docs_of(writer), pointer_of(writer), journal_of(writer)
    keep: Callable[[Any], bool] = {
        "reply lost": lambda s: True,  # Berlin current, Lisbon left under the main prefix
        "no document": lambda s: pointer(s) or journal(s),  # the pointer names a write never stored
        "no pointer": lambda s: docs(s) or journal(s),  # a document no version list knows
    }[crash]
    berlin = await crash_writing(writer, "Berlin", Y2024, keep=keep)
    other = make_store()
    with holding(other, orders(other, order)) as calls:
        rome = await other.remember("Rome", subject="city", valid_from=Y2025, **ADA)
    assert len([c for c in calls if write_trip(other)(c)]) == 1, "the write was sent again"
    pending = f"{other.keys.name}:subj:pending"
    left = await other.backend.command("test", "ZRANGE", pending, 0, -1)
    assert not [m for m in map(as_text, left) if m.endswith(f":{berlin}")], "returned before the repair"
    if crash == "no document":
        ends, probes = {lisbon: Y2025}, {Y2022: {lisbon}, Y2024: {lisbon}, Y2025 + 1: {rome}}
    else:
        ends, probes = {berlin: Y2025, lisbon: Y2024}, {Y2022: {lisbon}, Y2024: {berlin}, Y2025 + 1: {rome}}
    await check(other, rome, ends, probes)
