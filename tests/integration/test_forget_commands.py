"""``forget_by_scope`` deletes a page of memories with a few multi-key commands (issue #29).

Counted on the server (``INFO commandstats``), not timed: a page of 500 memories used
to cost 1,000 ``DEL`` commands (the document, then its access counter and update
history), where betterdb-agent-memory sends one. Now one ``DEL`` per hash slot for the
documents and one for their side keys: two per page on a single server.
"""

from __future__ import annotations

from typing import Any

import pytest

from betterdb_memory import MemoryStore

pytestmark = pytest.mark.integration


async def _deletes(client: Any) -> int:
    stats = await client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("del", "unlink"))


async def _keys(client: Any, name: str) -> list[str]:
    out = []
    async for k in client.scan_iter(match=f"{name}:*", count=1000):
        out.append(k.decode() if isinstance(k, bytes) else k)
    return out


async def test_a_scope_of_1200_memories_goes_in_a_handful_of_deletes_side_keys_included(
    make_store: Any, client: Any
) -> None:
    store: MemoryStore = make_store()
    keep = await store.remember("keep me", thread_id="other")
    ids = await store.remember_many([{"content": f"bulk note {i}", "thread_id": "gone"} for i in range(1200)])
    await store.recall("bulk note 7", k=20, thread_id="gone")  # access counters
    for mid in ids[:5]:
        await store.update(mid, content="an updated note")  # update histories
    before = await _keys(store.client, store.name)
    assert any(":acc:" in k for k in before) and any(":upd:" in k for k in before), before[:20]

    deletes = await _deletes(client)
    assert await store.forget_by_scope(thread_id="gone") == 1200
    sent = await _deletes(client) - deletes
    # Three pages (500, 500, 200) of two DELs each, and the history index's page: 1,200
    # memories no longer cost 2,400. A little room for the store's own background work.
    assert sent <= 12, sent

    left = await _keys(store.client, store.name)
    assert not [k for k in left if ":acc:" in k or ":upd:" in k], left
    assert [k for k in left if ":mem:" in k and not k.endswith(":idx")] == [store.keys.doc(keep)]
    assert await store.count(thread_id="gone") == 0
