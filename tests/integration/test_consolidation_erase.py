"""Wiping a scope removes consolidation history too: erasure leaves no superseded fact text."""

from __future__ import annotations

from typing import Any

import pytest

from betterdb_memory import Fact, MemoryStore

pytestmark = pytest.mark.integration


async def all_keys(client: Any, name: str) -> list[str]:
    out = []
    async for k in client.scan_iter(match=f"{name}:*", count=1000):
        out.append(k.decode() if isinstance(k, bytes) else k)
    return out


async def test_forget_by_scope_removes_fact_history(make_store: Any, client: Any) -> None:
    store: MemoryStore = make_store()
    await store.remember("Ada lives in Porto", thread_id="ada")
    await store.consolidate(
        mode="facts",
        extract_facts=lambda items: [Fact("home city", "Ada lives in Porto", date="2024-01-01")],
        thread_id="ada",
    )
    await store.remember("Ada moved to Lisbon", thread_id="ada")
    await store.consolidate(
        mode="facts",
        extract_facts=lambda items: [Fact("home city", "Ada lives in Lisbon", date="2025-01-01")],
        thread_id="ada",
    )
    history = await store.fact_history("home city", thread_id="ada")
    assert len(history) == 2
    keys = await all_keys(client, store.name)
    assert any(":hist:" in k for k in keys) and any(":cons:" in k for k in keys)

    assert await store.forget_by_scope(thread_id="ada") >= 2
    # Superseded facts live at <name>:hist:{...}; consolidation state under <name>:cons:.
    leftover = [k for k in await all_keys(client, store.name) if ":hist:" in k or ":cons:" in k]
    assert leftover == []
    assert await store.fact_history("home city", thread_id="ada") == []
