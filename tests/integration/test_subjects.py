"""``remember(subject=)`` on the real engine: one current version per subject, the rest in history.

Also run on valkey-search standalone (scripts/with-valkey-search.sh); the cluster's own
file is tests/cluster/test_cluster_subjects.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import MemoryStore
from betterdb_memory.core.keys import Scope
from betterdb_memory.core.subjects import ORPHAN_GRACE_MS, normalise_subject, subject_key_of
from betterdb_memory.errors import ConfigurationError, ValidationError

pytestmark = pytest.mark.integration

Y2019 = 1_546_300_800_000  # 2019-01-01T00:00:00Z
Y2022 = 1_640_995_200_000
Y2024 = 1_704_067_200_000


def digest(thread: str | None, subject: str, kind: str = "memory") -> str:
    return subject_key_of(Scope(thread_id=thread).tag, kind, normalise_subject(subject))


async def ids_of(store: MemoryStore, **scope: str) -> set[str]:
    return {i.id for i in (await store.list(**scope)).items}


async def test_a_newer_version_supersedes_and_the_old_one_leaves_the_index(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    old = await store.remember("Ada lives in Lisbon", thread_id="ada", subject="home city", valid_from=Y2019)
    new = await store.remember("Ada moved to Berlin", thread_id="ada", subject="Home  CITY", valid_from=Y2024)
    assert await ids_of(store, thread_id="ada") == {new}
    assert await store.count(thread_id="ada") == 1
    hits = await store.recall("Where does Ada live?", thread_id="ada", threshold=2.0, reinforce=False)
    assert [h.item.id for h in hits] == [new]
    # the old version is its history document: every field, plus its validity (ms) and successor
    hist = await client.hgetall(store.keys.hist_doc(old))
    assert hist[b"content"] == b"Ada lives in Lisbon"
    assert hist[b"valid_until"] == str(Y2024).encode() and hist[b"superseded_by"] == new.encode()
    assert hist[b"retracted"] == b"0" and hist[b"valid_from"] == str(Y2019).encode()
    assert await client.exists(store.keys.doc(old)) == 0
    d = digest("ada", "home city")
    assert await client.hget(store.keys.subject(d), "current") == new.encode()
    doc = await client.hgetall(store.keys.doc(new))
    assert doc[b"subject_key"] == d.encode() and doc[b"state_from"] == str(Y2024).encode()
    assert doc[b"subject"] == b"Home CITY"
    item = await store.get(new)
    assert item is not None and item.subject == "Home CITY" and item.valid_from == Y2024
    history = await store.fact_history("home city", thread_id="ada")
    assert [(r.id, r.current) for r in history] == [(new, True), (old, False)]
    assert history[1].valid_until is not None and int(history[1].valid_until.timestamp() * 1000) == Y2024
    assert history[1].superseded_by == new


async def test_an_older_dated_write_enters_history_and_supersedes_nothing(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    cur = await store.remember("Ada lives in Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    past = await store.remember("Ada lived in Porto", thread_id="ada", subject="city", valid_from=Y2019)
    mid = await store.remember("Ada lived in Lisbon", thread_id="ada", subject="city", valid_from=Y2022)
    assert await ids_of(store, thread_id="ada") == {cur}
    assert (await client.hget(store.keys.hist_doc(past), "valid_until")) == str(Y2022).encode()
    assert (await client.hget(store.keys.hist_doc(past), "superseded_by")) == mid.encode()
    assert (await client.hget(store.keys.hist_doc(mid), "valid_until")) == str(Y2024).encode()
    history = await store.fact_history("city", thread_id="ada")
    assert [r.id for r in history] == [cur, mid, past]
    # the same instant again: the later write wins
    same = await store.remember(
        "Ada lives in Berlin-Mitte", thread_id="ada", subject="city", valid_from=Y2024
    )
    assert await ids_of(store, thread_id="ada") == {same}


async def test_kinds_and_scopes_are_kept_apart(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    mine = await store.remember("I live in Lisbon", thread_id="a", subject="city", valid_from=Y2019)
    fact = (
        await store.remember_many(
            [
                {
                    "content": "lives in Berlin",
                    "thread_id": "a",
                    "subject": "city",
                    "kind": "fact",
                    "valid_from": Y2024,
                }
            ]
        )
    )[0]
    other = await store.remember("I live in Rome", thread_id="b", subject="city", valid_from=Y2024)
    ns = await store.remember(
        "I live in Oslo", thread_id="a", namespace="n", subject="city", valid_from=Y2024
    )
    assert await ids_of(store, thread_id="a") >= {mine, fact, ns}
    assert await ids_of(store, thread_id="b") == {other}


async def test_twenty_concurrent_writers_leave_exactly_one_current(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    ids = await asyncio.gather(
        *(
            store.remember(
                f"Ada lives in city {n}", thread_id="ada", subject="city", valid_from=Y2019 + n % 5
            )
            for n in range(20)
        )
    )
    live = await ids_of(store, thread_id="ada")
    assert len(live) == 1
    (current,) = live
    assert await client.hget(store.keys.subject(digest("ada", "city")), "current") == current.encode()
    assert (await store.get(current)) is not None
    # the current one carries the latest instant written
    item = await store.get(current)
    assert item is not None and item.valid_from == Y2019 + 4
    history = await store.fact_history("city", thread_id="ada")
    assert sorted(r.id for r in history) == sorted(ids) and sum(r.current for r in history) == 1


async def test_forgetting_the_current_leaves_no_current(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    old = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    new = await store.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    assert await store.forget(new) is True
    assert await ids_of(store, thread_id="ada") == set()
    assert await client.hget(store.keys.subject(digest("ada", "city")), "current") is None
    assert [r.id for r in await store.fact_history("city", thread_id="ada")] == [old]
    # writing the old statement again with its date makes it current again
    again = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    assert await ids_of(store, thread_id="ada") == {again}


async def test_bad_subjects_are_typed_errors_before_any_io(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    for bad, code in (
        ("   ", "validation.empty"),
        ("x" * 257, "validation.too_long"),
        (3, "validation.type"),
    ):
        with pytest.raises(ValidationError) as err:
            await store.remember("x", subject=bad)  # type: ignore[arg-type]
        assert err.value.code == code
    with pytest.raises(ValidationError) as err:
        await store.remember_many(["fine", {"content": "x", "subject": ""}])
    assert err.value.details["item"] == 1
    assert [k async for k in client.scan_iter(match=f"{store.keys.name}:*")] == []


async def test_a_crash_between_the_round_trips_is_repaired_by_the_next_write(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Round trip 1 only (the settle lost): two versions visible; the next write retires the stale one."""
    store = make_store()
    first = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    subjects = store._long_term.subjects

    async def lost(*args: object, **kwargs: object) -> int:
        return 0

    monkeypatch.setattr(subjects, "settle", lost)
    second = await store.remember("Porto", thread_id="ada", subject="city", valid_from=Y2022)
    assert await ids_of(store, thread_id="ada") == {first, second}  # one too many, nothing false
    assert await client.hget(store.keys.subject(digest("ada", "city")), "current") == second.encode()
    monkeypatch.undo()
    third = await store.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    assert await ids_of(store, thread_id="ada") == {third}
    assert await client.hget(store.keys.hist_doc(first), "valid_until") == str(Y2022).encode()
    assert await client.hget(store.keys.hist_doc(first), "superseded_by") == second.encode()


async def test_a_crash_after_round_trip_1_is_repaired_by_the_next_read(
    make_store: Callable[..., MemoryStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store()
    first = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)

    async def lost(*args: object, **kwargs: object) -> int:
        return 0

    monkeypatch.setattr(store._long_term.subjects, "settle", lost)
    second = await store.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    monkeypatch.undo()
    assert await ids_of(store, thread_id="ada") == {first, second}
    history = await store.fact_history("city", thread_id="ada")
    assert [(r.id, r.current) for r in history] == [(second, True), (first, False)]
    assert await ids_of(store, thread_id="ada") == {second}


async def test_a_write_that_never_reached_its_pointer_is_put_again(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """A document with a subject_key no version list knows (a crash after its HSET), older than the grace."""
    store = make_store()
    cur = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    d = digest("ada", "city")
    # the orphan: as a writer that died after its HSET would leave it, created long ago
    orphan = await store.remember("Porto", thread_id="ada", valid_from=Y2022)
    created = Y2022
    await client.hset(
        store.keys.doc(orphan), mapping={"subject": "city", "subject_key": d, "created_at": created}
    )
    assert ORPHAN_GRACE_MS < 10**12
    newest = await store.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    assert await ids_of(store, thread_id="ada") == {newest}
    assert await client.hget(store.keys.hist_doc(orphan), "superseded_by") == newest.encode()
    assert await client.hget(store.keys.hist_doc(cur), "valid_until") == str(Y2022).encode()


async def test_supersessions_are_counted(make_store: Callable[..., MemoryStore]) -> None:
    store = make_store()
    before = store.metrics._supersessions._value.get()
    await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    await store.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    await store.remember("Porto", thread_id="ada", subject="city", valid_from=Y2022)
    assert store.metrics._supersessions._value.get() - before == 2


async def test_subject_on_an_index_without_subject_key_is_refused(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    import dataclasses

    store = make_store()
    await store.remember("warm up")
    store.index.layout = dataclasses.replace(store.index.layout, subject_key=False)
    with pytest.raises(ConfigurationError) as err:
        await store.remember("x", subject="city")
    assert err.value.code == "configuration.index_outdated"


async def test_forget_by_scope_and_erase_delete_the_subjects_with_their_history(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    for thread in ("a", "b"):
        await store.remember("Lisbon", agent_id="ag", thread_id=thread, subject="city", valid_from=Y2019)
        await store.remember("Berlin", agent_id="ag", thread_id=thread, subject="city", valid_from=Y2024)
    kept = await store.remember("Rome", agent_id="other", subject="city", valid_from=Y2024)
    # a subject whose current was forgotten still has history: found through the scope's list
    gone = await store.remember("Oslo", agent_id="ag", thread_id="c", subject="city", valid_from=Y2019)
    await store.remember("Bergen", agent_id="ag", thread_id="c", subject="city", valid_from=Y2024)
    await store.forget((await store.list(agent_id="ag", thread_id="c")).items[0].id)
    assert await store.forget_by_scope(agent_id="ag", thread_id="a") == 1
    left = {k async for k in client.scan_iter(match=f"{store.keys.name}:*")}
    assert not any(b"subj:{" in k and b"thread" in k for k in left)
    assert await store.fact_history("city", agent_id="ag", thread_id="a") == []
    assert len(await store.fact_history("city", agent_id="ag", thread_id="b")) == 2
    assert await store.erase(agent_id="ag") >= 1
    left = {k.decode() async for k in client.scan_iter(match=f"{store.keys.name}:*")}
    assert not any(":hist:" in k for k in left), left
    assert store.keys.hist_doc(gone) not in left
    kd = subject_key_of(Scope(agent_id="other").tag, "memory", "city")
    assert {k for k in left if ":subj:" in k} == {
        store.keys.subject(kd),
        store.keys.subject_versions(kd),
        store.keys.subject_scopes,
        store.keys.subject_scope(Scope(agent_id="other").tag),
    }
    assert await store.get(kept) is not None


async def test_export_import_carries_subjects_validity_and_history(
    make_store: Callable[..., MemoryStore], unique_name: str, client: avalkey.Valkey
) -> None:
    import io

    from betterdb_memory.transfer import export_store, import_store

    source = make_store()
    old = await source.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    new = await source.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2024)
    buf = io.StringIO()
    await export_store(source, buf, vectors=True)
    target = make_store(name=unique_name + "_b")
    await import_store(target, buf.getvalue().splitlines())
    assert await ids_of(target, thread_id="ada") == {new}
    assert await target.get(new) == await source.get(new)
    assert await client.hgetall(target.keys.hist_doc(old)) == await client.hgetall(source.keys.hist_doc(old))
    before = await source.fact_history("city", thread_id="ada")
    after = await target.fact_history("city", thread_id="ada")
    assert after == before and [r.id for r in after] == [new, old]
    # the pointer is rebuilt: the next write supersedes the imported current
    newest = await target.remember("Paris", thread_id="ada", subject="city", valid_from=Y2024 + 1)
    assert await ids_of(target, thread_id="ada") == {newest}


async def test_update_keeps_a_current_version_current_and_dedup_never_swallows_a_version(
    make_store: Callable[..., MemoryStore],
) -> None:
    store = make_store(dedup=True)
    lisbon = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2019)
    berlin = await store.remember("Berlin", thread_id="ada", subject="city", valid_from=Y2022)
    # moving back: the same text as an old version, a new version (not deduplicated into the old one)
    back = await store.remember("Lisbon", thread_id="ada", subject="city", valid_from=Y2024)
    assert back not in (lisbon, berlin) and await ids_of(store, thread_id="ada") == {back}
    updated = await store.update(back, content="Lisbon, Alfama")
    assert updated.valid_from == Y2024 and updated.subject == "city"
    assert await ids_of(store, thread_id="ada") == {back}
    history = await store.fact_history("city", thread_id="ada")
    assert [(r.id, r.current) for r in history] == [(back, True), (berlin, False), (lisbon, False)]
    # a plain memory with the same text is no version of the subject: dedup leaves the write alone
    plain = await store.remember("I love Porto", thread_id="ada")
    fav = await store.remember("I love Porto", thread_id="ada", subject="favourite city")
    assert fav != plain and (await store.fact_history("favourite city", thread_id="ada"))[0].id == fav
    # an upsert by id with a later date stays the current version
    again = await store.remember("Porto", thread_id="ada", subject="city", valid_from=Y2024 + 5, id=back)
    assert again == back and back in await ids_of(store, thread_id="ada")


async def test_facts_written_before_subjects_keep_working(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """A store whose facts predate subjects: no subject_key, history in the ledger's own list. Read both."""
    from betterdb_memory import Fact
    from betterdb_memory.core.facts import subject_digest as legacy_digest
    from betterdb_memory.core.keys import ConsolidationKeys

    store = make_store()
    facts = {
        "a": [Fact("home city", "lives in Faro", "2018-01-01")],
        "b": [Fact("home city", "lives in Lisbon", "2019-01-01")],
        "c": [Fact("home city", "lives in Berlin", "2024-05-01")],
    }

    def extract(items: list[object]) -> list[Fact]:
        return [f for i in items for f in facts.get(getattr(i, "content", ""), [])]

    for text in ("a", "b"):
        await store.remember(text, thread_id="t")
        await store.consolidate("facts", extract_facts=extract, thread_id="t")
    # turn the store into one written before subjects
    scope = Scope(thread_id="t")
    d = subject_key_of(scope.tag, "fact", "home city")
    faro, lisbon = [r.id for r in reversed(await store.fact_history("home city", thread_id="t"))]
    await client.hdel(store.keys.doc(lisbon), "subject_key", "state_from", "valid_from")
    await client.hdel(store.keys.hist_doc(faro), "subject_key")
    await client.delete(store.keys.subject(d), store.keys.subject_versions(d))
    ck = ConsolidationKeys(store.keys, scope)
    await client.zadd(ck.history(legacy_digest("home city")), {faro: 1.0, lisbon: 2.0})
    assert [r.id for r in await store.fact_history("home city", thread_id="t")] == [lisbon, faro]
    # a newer fact supersedes the legacy current one, which no pointer names
    await store.remember("c", thread_id="t")
    res = await store.consolidate("facts", extract_facts=extract, thread_id="t")
    assert res.superseded == 1
    history = await store.fact_history("home city", thread_id="t", kind="fact")
    assert [(r.statement, r.current) for r in history] == [
        ("lives in Berlin", True),
        ("lives in Lisbon", False),
        ("lives in Faro", False),
    ]
    assert history[0].valid_from is not None and history[0].valid_from.year == 2024
    berlin = await store.get(history[0].id)
    assert berlin is not None and berlin.valid_from == 1_714_521_600_000  # its date, not the run's time
    assert {i.content for i in (await store.list(thread_id="t")).items} >= {"[2024-05-01] lives in Berlin"}
    assert "[2019-01-01] lives in Lisbon" not in {i.content for i in (await store.list(thread_id="t")).items}


async def test_facts_mode_on_an_index_without_subject_key_uses_the_ledgers_own_lists(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    """An index the reference made (no subject_key): facts still supersede, history still reads."""
    import dataclasses

    from betterdb_memory import Fact

    store = make_store()
    await store.remember("warm up", thread_id="other")
    store.index.layout = dataclasses.replace(store.index.layout, subject_key=False)
    facts = {"a": [Fact("city", "Lisbon", "2019-01-01")], "b": [Fact("city", "Berlin", "2024-05-01")]}

    def extract(items: list[object]) -> list[Fact]:
        return [f for i in items for f in facts.get(getattr(i, "content", ""), [])]

    for text in ("a", "b"):
        await store.remember(text, thread_id="t")
        await store.consolidate("facts", extract_facts=extract, thread_id="t")
    history = await store.fact_history("city", thread_id="t")
    assert [(r.statement, r.current) for r in history] == [("Berlin", True), ("Lisbon", False)]
    assert history[1].valid_until is not None and history[1].valid_until.year == 2024
    assert [k async for k in client.scan_iter(match=f"{store.keys.name}:subj:*")] == []


async def test_as_of_finds_the_version_valid_then_past_dated_writes_included(
    make_store: Callable[..., MemoryStore],
) -> None:
    """Versions written out of order: as_of sees exactly one per instant, the one valid then."""
    store = make_store()
    ids = {}
    for text, vf in (("Berlin", Y2024), ("Lisbon", Y2019), ("Porto", Y2022)):
        ids[text] = await store.remember(
            f"Ada lives in {text}", thread_id="ada", subject="city", valid_from=vf
        )
    year = 365 * 86_400_000
    for instant, text in ((Y2019 + year, "Lisbon"), (Y2022 + year // 2, "Porto"), (Y2024 + year, "Berlin")):
        page = await store.list(thread_id="ada", as_of=instant)
        assert [i.id for i in page.items] == [ids[text]], text
        assert await store.count(thread_id="ada", as_of=instant) == 1
    old = await store.get(ids["Lisbon"])
    assert old is not None and old.valid_until == Y2022
