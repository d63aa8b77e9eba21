"""The chaos workload of ``test_chaos`` and ``test_soak``: workers, their ledger, the auditor.

Workers remember (ids fixed before the first attempt), forget, read, count, recall,
append session turns and write into a full cap scope through a ``FaultProxy`` under
``Chaos``; half of them use a store object that never retries, so some writes raise.
``run_round`` runs one round (chaos, heal, recovery through the same stores, audit)
and returns its report; ``check`` asserts the goals (nothing lost, duplicated,
half-applied or back from the dead, no unbounded lock, forget truthful).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
from collections import Counter
from typing import Any

import valkey.asyncio as avalkey

from betterdb_memory import BetterDBMemoryError, HashingEmbedder, MemoryStore, RetryPolicy

from .conftest import Chaos, FaultProxy, random_unit, scan_keys

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


async def bounded(aw: Any) -> Any:
    return await asyncio.wait_for(aw, CALL_TIMEOUT)


async def _worker(
    n: int, store: MemoryStore, capped: MemoryStore, ledger: Ledger, rng: random.Random, *, run: str = "w"
) -> None:
    """``OPS`` random operations; ``run`` prefixes ids and turns (a soak's rounds reuse the stores)."""
    mine: list[str] = []  # acknowledged, not yet forgotten: only this worker forgets them
    for i in range(OPS):
        roll = rng.random()
        ledger.counts["operations"] += 1
        try:
            if roll < 0.45 or not mine:
                ns, thread = rng.choice(SCOPES)
                intent = Intent(f"{run}{n}-{i}", f"note {run}{n}-{i}", ns, thread, rng.choice([0.2, 0.5, 0.9]),
                                tuple(rng.sample(["a", "b"], rng.randint(0, 2))))  # fmt: skip
                try:
                    await bounded(store.remember(
                        intent.content, id=intent.id, namespace=ns, thread_id=thread, importance=intent.importance,
                        tags=list(intent.tags) or None, vector=random_unit(np_rng(n, i)),
                    ))  # fmt: skip
                except BetterDBMemoryError:
                    ledger.raised[intent.id] = intent
                    continue
                ledger.acked[intent.id] = intent
                mine.append(intent.id)
            elif roll < 0.6:
                mid = mine.pop(rng.randrange(len(mine)))
                try:
                    ok = await bounded(store.forget(mid))
                except BetterDBMemoryError:
                    ledger.forget_raised.add(mid)
                    continue
                if ok:
                    ledger.forgotten.add(mid)
                else:
                    ledger.forget_false.append(mid)
            elif roll < 0.75:
                user = f"turn {run}{n}-{i}"
                try:
                    await bounded(store.store_turn(THREAD, user, "ok"))
                except BetterDBMemoryError:
                    ledger.turns_raised.add(user)
                    continue
                ledger.turns_acked.add(user)
            elif roll < 0.85:
                mid = rng.choice(mine)
                item = await bounded(store.get(mid))
                assert item is not None and item.content == ledger.acked[mid].content, f"{mid} unreadable"
            elif roll < 0.9:
                ns, _ = rng.choice(SCOPES)
                await bounded(store.count(namespace=ns))
            elif roll < 0.95:  # a full cap scope: evictions under its lock
                try:
                    await bounded(
                        capped.remember(f"capped {n}-{i}", namespace="c", vector=random_unit(np_rng(n, i)))
                    )
                    ledger.counts["capped writes"] += 1
                except BetterDBMemoryError:
                    ledger.counts["capped writes raised"] += 1
            else:
                await bounded(
                    store.recall_by_vector(random_unit(np_rng(n, -i)), namespace="n1", threshold=2.0)
                )
        except BetterDBMemoryError:  # a read that ran out of retries: allowed, counted
            ledger.counts["reads raised"] += 1


def np_rng(n: int, i: int) -> Any:
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


@dataclasses.dataclass
class Stores:
    """The workload's three store objects on one client through the proxy."""

    client: avalkey.Valkey
    store: MemoryStore
    fragile: MemoryStore  # same store, never retries
    capped: MemoryStore  # another store, max_items_per_scope=CAP

    @classmethod
    async def open(cls, url: str, name: str) -> Stores:
        client = avalkey.Valkey.from_url(url, socket_timeout=1.0, socket_connect_timeout=1.0)
        options: dict[str, Any] = {"embedder": HashingEmbedder(), "discovery": False}
        l1 = {"max_session_turns": 100_000, "summarize_batch": 0}
        stores = cls(
            client,
            MemoryStore(client=client, name=name, retry=RETRY, max_items_per_scope=1000, **options, **l1),
            MemoryStore(client=client, name=name, retry=RetryPolicy(attempts=1), max_items_per_scope=1000, **options, **l1),
            MemoryStore(client=client, name=f"{name}cap", retry=RETRY, max_items_per_scope=CAP, **options),
        )  # fmt: skip
        await stores.store.ensure_index()
        await stores.capped.ensure_index()
        return stores

    async def close(self) -> None:
        await self.capped.close()
        await self.fragile.close()
        await self.store.close()
        await self.client.aclose()


async def run_round(
    proxy: FaultProxy, stores: Stores, text_client: avalkey.Valkey, *, seed: int, run: str = "w"
) -> tuple[dict[str, Any], Ledger, Counter[str]]:
    """One round: workers under chaos, heal, recovery through the same stores, audit; its report."""
    chaos = Chaos(seed=seed)
    ledger = Ledger()
    store, capped = stores.store, stores.capped
    proxy.chaos(chaos)
    try:
        await asyncio.gather(
            *(
                _worker(
                    n,
                    stores.fragile if n % 2 else store,
                    capped,
                    ledger,
                    random.Random(seed * 100 + n),
                    run=run,
                )
                for n in range(WORKERS)
            )
        )
    finally:
        proxy.heal()
    # recovery without a restart: the same stores, through the healed proxy; one write
    # holds the cap scope to its cap again (an eviction a fault failed left it over)
    await bounded(capped.remember("after the storm", namespace="c", vector=random_unit(np_rng(99, 1))))
    capped_count = await bounded(capped.count(namespace="c"))
    probe = await bounded(
        store.remember("after the storm", id=f"{run}probe", namespace="n9", vector=random_unit(np_rng(99, 0)))
    )
    assert (await bounded(store.get(probe))) is not None
    assert await bounded(store.forget(probe)) is True
    audit = await _audit(store, ledger, text_client)
    audit["cap scope over its cap"] = int(capped_count > CAP)
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
    return report, ledger, audit


def describe(report: dict[str, Any]) -> str:
    return "; ".join(f"{k.strip()}={v}" for k, v in report.items())


def check(report: dict[str, Any], ledger: Ledger, audit: Counter[str]) -> None:
    """The goals: zero lost, duplicated, half-applied, resurrected; bounded locks; truthful forgets."""
    assert report["faults injected"] > 0, "the proxy injected nothing"
    assert audit["lost"] == 0 and audit["duplicated"] == 0, report
    assert audit["forgotten but back"] == 0 and audit["half-applied"] == 0 and audit["unknown"] == 0, report
    assert audit["turns lost"] == 0 and audit["turns duplicated"] == 0, report
    assert audit["locks without bound"] == 0 and audit["cap scope over its cap"] == 0, report
    assert ledger.forget_false == [], f"forget answered False for memories it deleted: {ledger.forget_false}"
