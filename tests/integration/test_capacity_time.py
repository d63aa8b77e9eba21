"""``max_items_per_scope`` and time: dated events, subjects' current versions, expired memories.

docs/concepts/time.md: the keep-score counts from ``valid_from`` like recall's recency
(an old event goes before a fresh one of the same importance), except for a subject's
current version, a state that holds now: it counts from its write at the earliest.
docs/concepts/writes.md: a cap counts live memories only.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from betterdb_memory import Fact, MemoryStore

pytestmark = pytest.mark.integration

DIM = 384  # HashingEmbedder's default, the make_store fixture's embedder
LONG_AGO = "2019-03-01"


def unit(i: int) -> list[float]:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return list(v)


async def test_a_current_version_dated_long_ago_outlives_fresh_less_important_notes(make_store: Any) -> None:
    """Before: its keep-score counted from 2019, so the statement of where Ada lives, current
    and important, was the first victim of her thread, before notes written today."""
    s: MemoryStore = make_store(max_items_per_scope=3)
    home = await s.remember(
        "Ada lives in Lisbon.", subject="Ada's home", valid_from=LONG_AGO, importance=0.8,
        thread_id="ada", vector=unit(0),
    )  # fmt: skip
    event = await s.remember(
        "Ada ran the Lisbon marathon.", valid_from=LONG_AGO, importance=0.8, thread_id="ada", vector=unit(1)
    )
    note = await s.remember("Ada likes tea.", importance=0.3, thread_id="ada", vector=unit(2))
    await s.remember("Ada likes jazz.", importance=0.3, thread_id="ada", vector=unit(3))
    assert await s.get(event) is None, "an old event still goes first (its recency is its date's)"
    await s.remember("Ada likes rain.", importance=0.3, thread_id="ada", vector=unit(4))
    assert await s.get(note) is None, "then the least important, oldest note"
    current = await s.get(home)
    assert current is not None and current.valid_until is None, "the current version stays"
    assert await s.count(thread_id="ada") == 3


async def test_a_consolidated_fact_dated_long_ago_ranks_by_importance_then_write(make_store: Any) -> None:
    """Found by the model test with consolidation: a fact dated 2022 of importance 1.0 was
    evicted before a memory of importance 0.9 written just before it."""
    s: MemoryStore = make_store(max_items_per_scope=3)
    target = {"namespace": "n1", "agent_id": "a1", "thread_id": "t1"}
    source = await s.remember("Ada works in Paris since 2022.", importance=1.0, vector=unit(0), **target)
    run = await s.consolidate(
        "facts",
        extract_facts=lambda items: [Fact("job", "Paris", "2022-01-01")],
        fact_importance=1.0,
        **target,
    )
    (fact,) = run.created
    lower = await s.remember("a note", id="m0", importance=0.9, namespace="n1", vector=unit(1))
    await s.remember("another", importance=1.0, namespace="n1", vector=unit(2))
    assert await s.get(lower) is None, "the lowest importance goes"
    assert await s.get(fact) is not None and await s.get(source) is not None


async def test_a_subject_version_dated_ahead_still_counts_from_its_date(make_store: Any, client: Any) -> None:
    """A plan (dated in the future) keeps the keep-score of its date, as an event does."""
    s: MemoryStore = make_store(max_items_per_scope=10)
    plan = await s.remember(
        "Ada moves to Porto.", subject="Ada's home", valid_from="2099-01-01", thread_id="ada"
    )
    event = await s.remember("Ada's party.", valid_from="2099-01-01", thread_id="ada")
    keeps = [float(await client.hget(s.keys.doc(m), "keep")) for m in (plan, event)]
    assert keeps[0] == keeps[1]


async def test_an_expired_memory_whose_key_is_still_there_does_not_count(
    make_store: Any, client: Any
) -> None:
    """Until the server's expiry removes its key, an expired memory is gone for every read but
    used to count toward the cap: a live memory was evicted for it, leaving the scope under
    its cap once the key went."""
    s: MemoryStore = make_store(max_items_per_scope=3)
    gone = await s.remember("expiring", importance=1.0, namespace="n", ttl=3600, vector=unit(0))
    low = await s.remember("low", importance=0.1, namespace="n", vector=unit(1))
    mid = await s.remember("mid", importance=0.5, namespace="n", vector=unit(2))
    # Its expiry time passed; its key not removed yet (what the server's expiry does later).
    # (Not read by id here: ``get`` of an expired memory deletes its key in the background.)
    await client.hset(s.keys.doc(gone), "expires_at", str(int(time.time() * 1000) - 1))
    assert await s.count(namespace="n") == 2
    new = await s.remember("new", importance=0.5, namespace="n", vector=unit(3))
    assert all(await s.get_many([low, mid, new])), "three live memories fit a cap of three"
    assert (await s.stats()).evictions == 0
    # Over the cap among live memories, a live one goes (the expired key is not a victim).
    await s.remember("newer", importance=0.5, namespace="n", vector=unit(4))
    assert await s.get(low) is None
    assert await s.count(namespace="n") == 3
    assert await client.exists(s.keys.doc(gone)), "the expired key was there all along"
