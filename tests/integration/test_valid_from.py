"""``remember(valid_from=)`` on the real engine: stored, read back, ranked by, exported and imported."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.core.scoring import keep_score
from betterdb_memory.errors import ValidationError
from betterdb_memory.transfer import export_store, import_store

pytestmark = pytest.mark.integration

MAY_2024 = 1_714_521_600_000  # 2024-05-01T00:00:00Z
JAN_2019 = 1_546_300_800_000  # 2019-01-01T00:00:00Z


async def test_stored_only_when_given_and_read_back(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    plain = await store.remember("Ada lives in Lisbon", thread_id="ada")
    dated = await store.remember(
        "Ada moved to Berlin in May 2024", thread_id="ada", valid_from=datetime(2024, 5, 1, tzinfo=UTC)
    )
    (many,) = await store.remember_many([{"content": "Ada was born in 1990", "valid_from": "2019-01-01"}])
    # a memory written without it has no field: the reference's document, byte for byte
    assert await client.hexists(store.keys.doc(plain), "valid_from") == 0
    assert await client.hget(store.keys.doc(dated), "valid_from") == str(MAY_2024).encode()
    p, d, m = await store.get(plain), await store.get(dated), await store.get(many)
    assert p is not None and d is not None and m is not None
    assert (p.valid_from, p.valid_until) == (p.created_at, None)
    assert (d.valid_from, d.valid_until) == (MAY_2024, None)
    assert m.valid_from == JAN_2019
    page = await store.list(thread_id="ada")
    assert {i.id: i.valid_from for i in page.items} == {plain: p.created_at, dated: MAY_2024}
    hits = await store.recall("Where does Ada live?", thread_id="ada", threshold=2.0, reinforce=False)
    assert {h.item.id: h.item.valid_from for h in hits} == {plain: p.created_at, dated: MAY_2024}


async def test_bad_valid_from_writes_nothing(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    with pytest.raises(ValidationError) as err:
        await store.remember("x", valid_from="last May")
    assert err.value.code == "validation.time_format"
    with pytest.raises(ValidationError) as err:
        await store.remember_many(["fine", {"content": "x", "valid_from": 1.5}])
    assert err.value.details["item"] == 1
    assert [k async for k in client.scan_iter(match=store.keys.doc_prefix + "*")] == []


async def test_an_old_dated_memory_ranks_below_a_new_dated_one(
    make_store: Callable[..., MemoryStore],
) -> None:
    """Same vector, same importance: only recency differs, counted from each one's valid_from."""
    emb = HashingEmbedder()
    store = make_store(embedder=emb)
    vector = [float(x) for x in (await emb.embed(["where does Ada live"]))[0]]
    # Within a few half-lives (7 days): years-old dates both have a recency below the score's
    # float resolution (0.5 ** (2000 / 7) ~ 1e-86) and tie.
    day = 86_400_000
    now = int(time.time() * 1000)
    new = await store.remember("Ada lives in Berlin", vector=vector, valid_from=now - 2 * day)
    old = await store.remember("Ada lives in Lisbon", vector=vector, valid_from=now - 30 * day)
    hits = await store.recall_by_vector(vector, threshold=2.0, k=2, reinforce=False)
    assert [h.item.id for h in hits] == [new, old]
    assert hits[0].similarity == hits[1].similarity and hits[0].score > hits[1].score
    # written in the other order, the same answer (not the insertion order)
    store2 = make_store(name=store.name + "_2", embedder=emb)
    old = await store2.remember("Ada lives in Lisbon", vector=vector, valid_from=now - 30 * day)
    new = await store2.remember("Ada lives in Berlin", vector=vector, valid_from=now - 2 * day)
    hits = await store2.recall_by_vector(vector, threshold=2.0, k=2, reinforce=False)
    assert [h.item.id for h in hits] == [new, old]


async def test_keep_score_counts_from_valid_from_and_reinforcement_keeps_a_plan_ahead(
    make_store: Callable[..., MemoryStore], client: avalkey.Valkey
) -> None:
    store = make_store()
    hl = store.half_life_seconds
    old = await store.remember("an old event", valid_from=JAN_2019)
    keep = float(await client.hget(store.keys.doc(old), "keep"))
    assert keep == keep_score(JAN_2019 / 1000, 0.5, hl)
    ahead = 4_102_444_800_000  # 2100-01-01: a plan
    plan = await store.remember("a plan", valid_from=ahead)
    await store.recall("a plan", threshold=2.0)  # reinforces: the keep-score is rewritten
    await store.close()  # by the flush of the access snapshot (tiers.reinforce)
    assert int(await client.hget(store.keys.doc(plan), "access_count")) == 1
    assert float(await client.hget(store.keys.doc(plan), "keep")) == pytest.approx(
        keep_score(ahead / 1000, 0.5, hl)
    )


async def test_export_import_keeps_valid_from(
    make_store: Callable[..., MemoryStore], unique_name: str
) -> None:
    source = make_store()
    dated = await source.remember("Ada moved to Berlin", valid_from=MAY_2024)
    plain = await source.remember("Ada likes tea")
    buf = io.StringIO()
    await export_store(source, buf, vectors=True)
    target = make_store(name=unique_name + "_b")
    await import_store(target, buf.getvalue().splitlines())
    for mid in (dated, plain):
        assert await target.get(mid) == await source.get(mid)
    got = await target.get(dated)
    assert got is not None and got.valid_from == MAY_2024
