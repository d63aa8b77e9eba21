"""Tenant isolation: namespace / agent / thread scopes, and ids chosen by an attacker.

Every memory is written in an exact scope ``(namespace, agent_id, thread_id)``; reads
take a filter scope where ``None`` means "any". Scope values are stored as written
(betterdb-agent-memory's layout) in case-sensitive TAG fields, escaped in every
query and checked against the raw values in every result, so an id full of query
syntax, or one that differs from another only in case, is simply another scope. An
id the engine would alter is refused before anything is written: outer whitespace
(the engine trims it, so ``"alice "`` would be ``"alice"``) or a comma (the TAG
separator, so ``"alice,bob"`` would be two values). This script checks each claim
with real calls and prints ``ok`` or ``LEAK`` (exit code 1 on a leak).

Short-term turns (L1) are keyed by ``(agent_id, thread_id)`` only; give each tenant
its own agent ids (here ``"<tenant>-support"``) so two tenants' sessions never share
keys.

Run: ``python examples/multi_tenant.py`` (``VALKEY_URL`` for your server, otherwise
the embedded engine in a temporary data dir).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile

from betterdb_memory import MemoryStore, ValidationError

TENANTS = ("acme", "globex")
# Ids an attacker might pick to reach other scopes: TAG syntax, wildcards, look-alikes.
HOSTILE_THREADS = (
    "alice",
    "Alice",
    "alice bob",
    "alice}|@namespace:{globex",
    "*alice",
    "alice\\",
    "ålice",
    "al🙂ice",
)
# Ids the engine would store altered: refused with a ValidationError, nothing written.
REFUSED_THREADS = {
    "alice ": "validation.whitespace",
    " alice": "validation.whitespace",
    "alice,bob": "validation.comma",
    "alice*": "validation.wildcard",
    "alice\u200b": "validation.whitespace",
    "ali\x00ce": "validation.control",
}


def agent_of(tenant: str) -> str:
    return f"{tenant}-support"


class Checker:
    """Prints each isolation claim with its verdict and remembers whether any failed."""

    def __init__(self) -> None:
        self.failed = 0

    def check(self, claim: str, ok: bool) -> None:
        self.failed += not ok
        print(f"  {'ok  ' if ok else 'LEAK'}  {claim}")


async def seed(store: MemoryStore) -> None:
    for tenant in TENANTS:
        for i, thread in enumerate(HOSTILE_THREADS):
            await store.remember(
                f"{tenant} secret for thread {thread!r}: the vault code is {4000 + i}",
                namespace=tenant,
                agent_id=agent_of(tenant),
                thread_id=thread,
            )
            await store.store_turn(
                thread, f"Hi from {tenant}", f"Hello {tenant} user", agent_id=agent_of(tenant)
            )


async def check_namespaces(store: MemoryStore, c: Checker) -> None:
    print("namespaces")
    for tenant in TENANTS:
        hits = await store.recall("what is the vault code?", k=50, threshold=2.0, namespace=tenant)
        c.check(f"recall in {tenant!r} returns only {tenant!r}", {h.item.namespace for h in hits} == {tenant})
        n = await store.count(namespace=tenant)
        c.check(f"count(namespace={tenant!r}) == {len(HOSTILE_THREADS)} (got {n})", n == len(HOSTILE_THREADS))
    wrong_agent = await store.count(namespace="acme", agent_id=agent_of("globex"))
    c.check(f"acme namespace with globex's agent id is empty (got {wrong_agent})", wrong_agent == 0)


async def check_hostile_threads(store: MemoryStore, c: Checker) -> None:
    print("hostile and look-alike thread ids (each must be its own scope)")
    for thread in HOSTILE_THREADS:
        hits = await store.recall("vault code", k=50, threshold=2.0, namespace="acme", thread_id=thread)
        threads = {h.item.thread_id for h in hits}
        c.check(f"thread {thread!r}: {len(hits)} hit(s), all its own", threads == {thread} and len(hits) == 1)


async def check_refused(store: MemoryStore, c: Checker) -> None:
    print("ids the engine would alter (refused before any write)")
    before = await store.count(namespace="acme")
    for thread, code in REFUSED_THREADS.items():
        got = None
        try:
            await store.remember("should never be stored", namespace="acme", thread_id=thread)
        except ValidationError as exc:
            got = exc.code
        c.check(f"thread {thread!r} refused ({got})", got == code)
    after = await store.count(namespace="acme")
    c.check(f"nothing written by a refused call ({before} -> {after} memories)", after == before)


async def check_turns(store: MemoryStore, c: Checker) -> None:
    print("short-term turns")
    for tenant in TENANTS:
        turns = await store.get_recent_turns("alice", agent_id=agent_of(tenant))
        texts = [t.user_message for t in turns]
        c.check(
            f"{tenant!r} session 'alice' holds only its own turn: {texts}", texts == [f"Hi from {tenant}"]
        )
        ctx = await store.retrieve_context(
            "alice", "vault code", token_budget=400, agent_id=agent_of(tenant), namespace=tenant
        )
        spaces = {h.item.namespace for h in ctx.memories}
        c.check(
            f"retrieve_context for {tenant!r} recalls from {sorted(map(str, spaces))}", spaces == {tenant}
        )


async def check_erasure(store: MemoryStore, c: Checker) -> None:
    print("erasing one tenant")
    removed = await store.erase(agent_id=agent_of("acme"))
    left_acme = await store.count(namespace="acme")
    left_globex = await store.count(namespace="globex")
    c.check(f"erase(acme) removed {removed} memories+turns, acme now has {left_acme}", left_acme == 0)
    c.check(f"globex untouched: {left_globex} memories", left_globex == len(HOSTILE_THREADS))
    await store.erase(agent_id=agent_of("globex"))


async def main() -> int:
    url = os.environ.get("VALKEY_URL") or None  # None: the embedded engine
    with tempfile.TemporaryDirectory(prefix="betterdb-tenants-") as data_dir:
        store = await MemoryStore.connect(url, name="example-tenants", data_dir=data_dir)
        c = Checker()
        try:
            for tenant in TENANTS:  # start clean if an earlier run was interrupted
                await store.erase(agent_id=agent_of(tenant))
            await seed(store)
            await check_namespaces(store, c)
            await check_hostile_threads(store, c)
            await check_refused(store, c)
            await check_turns(store, c)
            await check_erasure(store, c)
        finally:
            await store.close()
    print("isolation holds" if not c.failed else f"{c.failed} isolation check(s) FAILED")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
