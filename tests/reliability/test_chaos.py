"""Random faults on the wire during a mixed concurrent workload, then an audit of what the store holds.

``FaultProxy.chaos`` injects latency, resets before and after the server applied a
command, torn and dropped replies, half-open connections and slow reads on random
chunks while workers remember (ids fixed before the first attempt), forget, read,
count, recall and append session turns through it (half of them through a store
object that never retries, so some writes raise). Then the proxy heals and an
auditor, on a direct connection, checks: every acknowledged write is readable
exactly once, a write that raised is whole or absent, a forget that answered is
right (a memory that existed and is gone answers True, even when a retry found
nothing left), no lock outlives its TTL, and the same store (no restart) works again.
The counts are printed. ``BETTERDB_CHAOS_OPS`` sets the operations per worker.
"""

from __future__ import annotations

import os

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import HashingEmbedder, MemoryStore
from betterdb_memory.tiers import erasure

from .chaos_workload import RETRY, Stores, bounded, check, describe, np_rng, run_round
from .conftest import FaultProxy, random_unit

pytestmark = [pytest.mark.integration, pytest.mark.reliability]


async def test_forget_answers_true_when_its_retry_finds_what_the_lost_reply_deleted(
    fault_proxy: FaultProxy, unique_name: str
) -> None:
    """The DEL runs, its reply is lost, the retry deletes nothing: the memory existed, so True."""
    client = avalkey.Valkey.from_url(fault_proxy.url, socket_timeout=3.0)
    store = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(), retry=RETRY, discovery=False
    )
    try:
        mid = await store.remember("to be forgotten", thread_id="t")
        fault_proxy.arm(b"DEL", after=True)
        assert await bounded(store.forget(mid)) is True
        assert fault_proxy.cuts == 1, "the reply of the applied DEL was cut"
        assert await store.get(mid) is None
        assert await bounded(store.forget(mid)) is False, "nothing left, no fault: exactly False"
    finally:
        await store.close()
        await client.aclose()


async def test_a_workload_through_random_wire_faults_loses_and_duplicates_nothing(
    fault_proxy: FaultProxy, unique_name: str, text_client: avalkey.Valkey
) -> None:
    """Acknowledged writes survive exactly once, failed ones are whole or absent, forget tells the truth."""
    stores = await Stores.open(fault_proxy.url, unique_name)
    try:
        seed = int(os.environ.get("BETTERDB_CHAOS_SEED", "30"))
        report, ledger, audit = await run_round(fault_proxy, stores, text_client, seed=seed)
    finally:
        await stores.close()
    print("chaos audit:", describe(report))
    check(report, ledger, audit)


async def test_forget_by_scope_finishes_and_counts_a_page_whose_reply_was_lost(
    fault_proxy: FaultProxy, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page's deletes run, their reply is lost, the retry deletes nothing: the next pages still go.

    Pages of 3 here (500 in the package), so the cut lands on the first of three pages.
    """
    monkeypatch.setattr(erasure, "_FORGET_PAGE", 3)
    client = avalkey.Valkey.from_url(fault_proxy.url, socket_timeout=3.0)
    store = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(), retry=RETRY, discovery=False
    )
    try:
        for i in range(7):
            await store.remember(f"note {i}", thread_id="t", vector=random_unit(np_rng(7, i)))
        fault_proxy.arm(b"DEL", after=True)
        assert await bounded(store.forget_by_scope(thread_id="t")) == 7
        assert fault_proxy.cuts == 1, "the reply of the applied deletes was cut"
        assert await store.count(thread_id="t") == 0, "every page deleted"
    finally:
        await store.close()
        await client.aclose()
