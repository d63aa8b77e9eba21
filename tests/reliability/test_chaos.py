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

import asyncio
import dataclasses
import os
import random
from collections import Counter
from typing import Any

import pytest
import valkey.asyncio as avalkey

from betterdb_memory import BetterDBMemoryError, HashingEmbedder, MemoryStore, RetryPolicy
from betterdb_memory.tiers import erasure

from .conftest import Chaos, FaultProxy, random_unit, scan_keys

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

WORKERS = 8
OPS = int(os.environ.get("BETTERDB_CHAOS_OPS", "60"))
CALL_TIMEOUT = 60.0  # generous: a hang fails the test, durations are never asserted
RETRY = RetryPolicy(attempts=8, base_delay=0.02, max_delay=0.2, budget=15.0)
SCOPES = [("n1", "t1"), ("n1", "t2"), ("n2", "t1")]
THREAD = "chat"
CAP = 5  # the capped store's max_items_per_scope


@dataclasses.dataclass
class Intent:
    """What a remember asked for (checked field by field against what is stored)."""

    id: str
    content: str
    namespace: str
    thread_id: str
    importance: float
    tags: tuple[str, ...]


@dataclasses.dataclass
class Ledger:
    """What the workload was told: the auditor's expectations."""

    acked: dict[str, Intent] = dataclasses.field(default_factory=dict)
    raised: dict[str, Intent] = dataclasses.field(default_factory=dict)
    forgotten: set[str] = dataclasses.field(default_factory=set)  # forget answered True
    forget_raised: set[str] = dataclasses.field(default_factory=set)
    forget_false: list[str] = dataclasses.field(default_factory=list)  # answered False for a live memory
    turns_acked: set[str] = dataclasses.field(default_factory=set)
    turns_raised: set[str] = dataclasses.field(default_factory=set)
    counts: Counter[str] = dataclasses.field(default_factory=Counter)


async def _bounded(aw: Any) -> Any:
    return await asyncio.wait_for(aw, CALL_TIMEOUT)


async def _worker(
    n: int, store: MemoryStore, capped: MemoryStore, ledger: Ledger, rng: random.Random
) -> None:
    mine: list[str] = []  # acknowledged, not yet forgotten: only this worker forgets them
    for i in range(OPS):
        roll = rng.random()
        ledger.counts["operations"] += 1
        try:
            if roll < 0.45 or not mine:
                ns, thread = rng.choice(SCOPES)
                intent = Intent(f"w{n}-{i}", f"note {n}-{i}", ns, thread, rng.choice([0.2, 0.5, 0.9]),
                                tuple(rng.sample(["a", "b"], rng.randint(0, 2))))  # fmt: skip
                try:
                    await _bounded(store.remember(
                        intent.content, id=intent.id, namespace=ns, thread_id=thread, importance=intent.importance,
                        tags=list(intent.tags) or None, vector=random_unit(_np_rng(n, i)),
                    ))  # fmt: skip
                except BetterDBMemoryError:
                    ledger.raised[intent.id] = intent
                    continue
                ledger.acked[intent.id] = intent
                mine.append(intent.id)
            elif roll < 0.6:
                mid = mine.pop(rng.randrange(len(mine)))
                try:
                    ok = await _bounded(store.forget(mid))
                except BetterDBMemoryError:
                    ledger.forget_raised.add(mid)
                    continue
                if ok:
                    ledger.forgotten.add(mid)
                else:
                    ledger.forget_false.append(mid)
            elif roll < 0.75:
                user = f"turn {n}-{i}"
                try:
                    await _bounded(store.store_turn(THREAD, user, "ok"))
                except BetterDBMemoryError:
                    ledger.turns_raised.add(user)
                    continue
                ledger.turns_acked.add(user)
            elif roll < 0.85:
                mid = rng.choice(mine)
                item = await _bounded(store.get(mid))
                assert item is not None and item.content == ledger.acked[mid].content, f"{mid} unreadable"
            elif roll < 0.9:
                ns, _ = rng.choice(SCOPES)
                await _bounded(store.count(namespace=ns))
            elif roll < 0.95:  # a full cap scope: evictions under its lock
                try:
                    await _bounded(
                        capped.remember(f"capped {n}-{i}", namespace="c", vector=random_unit(_np_rng(n, i)))
                    )
                    ledger.counts["capped writes"] += 1
                except BetterDBMemoryError:
                    ledger.counts["capped writes raised"] += 1
            else:
                await _bounded(
                    store.recall_by_vector(random_unit(_np_rng(n, -i)), namespace="n1", threshold=2.0)
                )
        except BetterDBMemoryError:  # a read that ran out of retries: allowed, counted
            ledger.counts["reads raised"] += 1


def _np_rng(n: int, i: int) -> Any:
    import numpy as np

    return np.random.default_rng([n, i + 10_000])


async def _audit(store: MemoryStore, ledger: Ledger, text_client: avalkey.Valkey) -> Counter[str]:
    """Everything the ledger says, against the store read without faults."""
    out: Counter[str] = Counter(
        dict.fromkeys(["lost", "forgotten but back", "half-applied", "locks without bound"], 0)
    )
    live = {mid for mid in ledger.acked if mid not in ledger.forgotten and mid not in ledger.forget_raised}
    live |= set(ledger.forget_false)  # a False answer means "nothing deleted": it must still be there
    items = {i.id: i for i in (await store.list(limit=1000, namespace="n1")).items}
    items |= {i.id: i for i in (await store.list(limit=1000, namespace="n2")).items}
    contents = Counter(i.content for i in items.values())
    out["duplicated"] = sum(c - 1 for c in contents.values() if c > 1)
    for mid in live:
        if mid not in items:
            out["lost"] += 1
    for mid in ledger.forgotten:
        if mid in items:
            out["forgotten but back"] += 1
    # a write that raised: whole or absent, never half-applied
    for mid, intent in ledger.raised.items():
        item = items.get(mid)
        if item is None:
            continue
        out["raised, stored whole"] += 1
        got = (item.content, item.namespace, item.thread_id, item.importance, tuple(sorted(item.tags)))
        want = (
            intent.content,
            intent.namespace,
            intent.thread_id,
            intent.importance,
            tuple(sorted(intent.tags)),
        )
        if got != want:
            out["half-applied"] += 1
    out["unknown"] = len(set(items) - set(ledger.acked) - set(ledger.raised))
    # every acknowledged turn once, none that raised twice
    users = Counter(t.user_message for t in await store.get_recent_turns(THREAD))
    out["turns lost"] = sum(1 for u in ledger.turns_acked if users[u] != 1)
    out["turns duplicated"] = sum(1 for u, c in users.items() if c > 1)
    # no lock without a TTL, none beyond its TTL
    for key in await scan_keys(text_client, f"{store.name}*:*lock*"):
        out["locks seen"] += 1
        ttl = await text_client.pttl(key)
        if ttl < 0 or ttl > 60_000:
            out["locks without bound"] += 1
    return out


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
        assert await _bounded(store.forget(mid)) is True
        assert fault_proxy.cuts == 1, "the reply of the applied DEL was cut"
        assert await store.get(mid) is None
        assert await _bounded(store.forget(mid)) is False, "nothing left, no fault: exactly False"
    finally:
        await store.close()
        await client.aclose()


async def test_a_workload_through_random_wire_faults_loses_and_duplicates_nothing(
    fault_proxy: FaultProxy, unique_name: str, text_client: avalkey.Valkey
) -> None:
    """Acknowledged writes survive exactly once, failed ones are whole or absent, forget tells the truth."""
    chaos = Chaos(seed=int(os.environ.get("BETTERDB_CHAOS_SEED", "30")))
    client = avalkey.Valkey.from_url(fault_proxy.url, socket_timeout=1.0, socket_connect_timeout=1.0)
    store = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(), retry=RETRY, discovery=False,
        max_items_per_scope=1000, max_session_turns=10_000, summarize_batch=0,
    )  # fmt: skip
    fragile = MemoryStore(
        client=client, name=unique_name, embedder=HashingEmbedder(), retry=RetryPolicy(attempts=1),
        discovery=False, max_items_per_scope=1000, max_session_turns=10_000, summarize_batch=0,
    )  # fmt: skip
    capped = MemoryStore(
        client=client, name=f"{unique_name}cap", embedder=HashingEmbedder(), retry=RETRY, discovery=False,
        max_items_per_scope=CAP,
    )  # fmt: skip
    ledger = Ledger()
    try:
        await store.ensure_index()
        await capped.ensure_index()
        fault_proxy.chaos(chaos)
        # half the workers through a store object that never retries: their writes raise, and
        # each one that raised must be whole or absent
        await asyncio.gather(
            *(
                _worker(n, fragile if n % 2 else store, capped, ledger, random.Random(n))
                for n in range(WORKERS)
            )
        )
        fault_proxy.heal()
        # recovery without a restart: the same stores, through the healed proxy; one write
        # holds the cap scope to its cap again (an eviction a fault failed left it over)
        await _bounded(capped.remember("after the storm", namespace="c", vector=random_unit(_np_rng(99, 1))))
        assert await _bounded(capped.count(namespace="c")) == min(CAP, ledger.counts["capped writes"] + 1)
        probe = await _bounded(
            store.remember("after the storm", id="probe", namespace="n9", vector=random_unit(_np_rng(99, 0)))
        )
        assert (await _bounded(store.get(probe))) is not None
        assert await _bounded(store.forget(probe)) is True
        audit = await _audit(store, ledger, text_client)
    finally:
        fault_proxy.heal()
        await capped.close()
        await fragile.close()
        await store.close()
        await client.aclose()
    report = {
        "operations": ledger.counts["operations"],
        "faults injected": sum(chaos.injected.values()),
        **{f"  {k}": v for k, v in sorted(chaos.injected.items())},
        "acknowledged writes": len(ledger.acked),
        "writes raised": len(ledger.raised),
        "forgets True / False-while-live / raised": (
            f"{len(ledger.forgotten)} / {len(ledger.forget_false)} / {len(ledger.forget_raised)}"
        ),
        "turns acknowledged / raised": f"{len(ledger.turns_acked)} / {len(ledger.turns_raised)}",
        "capped writes acknowledged / raised": (
            f"{ledger.counts['capped writes']} / {ledger.counts['capped writes raised']}"
        ),
        "reads raised": ledger.counts["reads raised"],
        **audit,
    }
    print("chaos audit:", "; ".join(f"{k.strip()}={v}" for k, v in report.items()))
    assert sum(chaos.injected.values()) > 0, "the proxy injected nothing"
    assert audit["lost"] == 0 and audit["duplicated"] == 0, report
    assert audit["forgotten but back"] == 0 and audit["half-applied"] == 0 and audit["unknown"] == 0, report
    assert audit["turns lost"] == 0 and audit["turns duplicated"] == 0, report
    assert audit["locks without bound"] == 0, report
    assert ledger.forget_false == [], f"forget answered False for memories it deleted: {ledger.forget_false}"


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
            await store.remember(f"note {i}", thread_id="t", vector=random_unit(_np_rng(7, i)))
        fault_proxy.arm(b"DEL", after=True)
        assert await _bounded(store.forget_by_scope(thread_id="t")) == 7
        assert fault_proxy.cuts == 1, "the reply of the applied deletes was cut"
        assert await store.count(thread_id="t") == 0, "every page deleted"
    finally:
        await store.close()
        await client.aclose()
